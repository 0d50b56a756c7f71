// pgqueue dashboard: live updates. The page listens to the dashboard's event stream; on a change
// of its queue (or of any, on the overview) it refetches its own URL with ?fragment=1 and swaps
// the live region's content in, keeping focus and the open state of folded parts. One fetch at a
// time; changes meanwhile cause one more. A swap waits while a pointer is pressed in the region:
// a press on one element and a release on its fresh copy would be no click at all.
(function () {
  "use strict";
  var indicator = document.querySelector('[data-testid="live-status"]');
  var region = document.querySelector("[data-live]");
  var body = document.body;
  function setStatus(state, text) {
    if (!indicator) return;
    indicator.setAttribute("data-state", state);
    indicator.textContent = text;
  }
  if (!region || !window.EventSource || !window.fetch) return;
  var pageQueue = body.getAttribute("data-queue") || "";
  var refreshes = 0, busy = false, again = false;
  var leaving = false; // a form of the page was sent: the page it leads to is coming
  var pressed = false, held = null; // a pointer is down in the region; the swap it holds back

  region.addEventListener("pointerdown", function () { pressed = true; }, true);
  function release() {
    if (!pressed) return;
    pressed = false;
    // After the click this release completes, which is dispatched in the same task.
    setTimeout(function () {
      if (held !== null && !pressed) { var html = held; held = null; swap(html); }
    }, 0);
  }
  document.addEventListener("pointerup", release, true);
  document.addEventListener("pointercancel", release, true);

  function swap(html) {
    if (pressed) { held = html; return; }
    var active = document.activeElement;
    var focusID = active && region.contains(active) ? active.id : "";
    // What the reader opened (an attempt's stack) stays open across the swap.
    var open = [];
    region.querySelectorAll("details[data-key][open]").forEach(function (d) {
      open.push(d.getAttribute("data-key"));
    });
    region.innerHTML = html;
    region.querySelectorAll("details[data-key]").forEach(function (d) {
      if (open.indexOf(d.getAttribute("data-key")) >= 0) d.open = true;
    });
    refreshes++;
    region.setAttribute("data-refreshes", String(refreshes));
    if (focusID) {
      var el = document.getElementById(focusID);
      if (el) el.focus();
    }
  }

  function refresh() {
    if (leaving) return;
    if (busy) { again = true; return; }
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    fetch(url.toString(), { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        // An error's fragment says what happened (the job was deleted, access was withdrawn).
        return r.text();
      })
      .then(swap)
      .catch(function () { /* the next change or resync tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  setStatus("connecting", "connecting…");
  var events = new EventSource(body.getAttribute("data-events"));
  events.addEventListener("status", function (e) {
    var d = JSON.parse(e.data);
    setStatus(d.state, d.text);
  });
  events.addEventListener("change", function (e) {
    var d = JSON.parse(e.data);
    if (d.resync || !pageQueue || (d.queues || []).indexOf(pageQueue) >= 0) refresh();
  });
  events.addEventListener("error", function () {
    setStatus("reconnecting", "reconnecting…");
  });
  window.addEventListener("pagehide", function () { events.close(); });
  // An action's change (a job deleted) would refresh the page it is leaving, to no purpose.
  document.addEventListener("submit", function (e) {
    if (!e.defaultPrevented) leaving = true;
  });
})();
