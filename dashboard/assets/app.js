// pgqueue dashboard: live updates. The page listens to the dashboard's event stream; on a change
// of its queues (or of any, on the overview) it refetches its own URL with ?fragment=1 and swaps
// the live region's content in, keeping focus and the open state of folded parts. One fetch at a
// time; changes meanwhile cause one more. A swap waits while a pointer is pressed in the region:
// a press on one element and a release on its fresh copy would be no click at all.
//
// Between refreshes the page keeps moving while no job changes: every second its relative times
// and waits are counted on from their values at the render (data-ago, data-wait), and a time to
// come that comes due refreshes the page; a region marked data-samples (the overview's charts),
// or holding an element so marked (a running workflow), also refreshes on each of the server's
// samples, while the page is visible.
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
  // The queues the page shows jobs of (a workflow's can be several); none: every queue.
  var pageQueues = (body.getAttribute("data-queue") || "").split(" ").filter(Boolean);
  var refreshes = 0, busy = false, again = false;
  var leaving = false; // a form of the page was sent: the page it leads to is coming
  var renderedAt = performance.now(); // when the region's content was rendered, about
  var samplesMissed = false; // a sample came while the page was hidden
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
    renderedAt = performance.now();
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

  // formatDuration writes ms as the server's formatDuration does: ms, s, m, h, d.
  function formatDuration(ms) {
    function pad(n) { return (n < 10 ? "0" : "") + n; }
    if (ms <= 0) return "0s";
    if (ms < 1000) return Math.floor(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
    if (ms < 3600000) return Math.floor(ms / 60000) + "m" + pad(Math.floor(ms / 1000) % 60) + "s";
    if (ms < 48 * 3600000) return Math.floor(ms / 3600000) + "h" + pad(Math.floor(ms / 60000) % 60) + "m";
    return Math.floor(ms / 86400000) + "d";
  }

  function tick() {
    var since = performance.now() - renderedAt, due = false;
    region.querySelectorAll("[data-ago]").forEach(function (el) {
      var then = Number(el.getAttribute("data-ago")), ago = then + since;
      el.textContent = ago <= 0 ? "in " + formatDuration(-ago) : formatDuration(ago) + " ago";
      if (then < 0 && ago > 0 && !el.hasAttribute("data-due")) {
        el.setAttribute("data-due", ""); // once: the refresh brings what it is now
        due = true;
      }
    });
    region.querySelectorAll("[data-wait]").forEach(function (el) {
      el.textContent = formatDuration(Number(el.getAttribute("data-wait")) + since);
    });
    if (due) refresh();
  }
  setInterval(tick, 1000);

  setStatus("connecting", "connecting…");
  var events = new EventSource(body.getAttribute("data-events"));
  events.addEventListener("status", function (e) {
    var d = JSON.parse(e.data);
    setStatus(d.state, d.text);
  });
  events.addEventListener("change", function (e) {
    var d = JSON.parse(e.data);
    var mine = (d.queues || []).some(function (q) { return pageQueues.indexOf(q) >= 0; });
    if (d.resync || !pageQueues.length || mine) refresh();
  });
  events.addEventListener("sample", function () {
    if (!region.hasAttribute("data-samples") && !region.querySelector("[data-samples]")) return;
    if (document.visibilityState === "hidden") { samplesMissed = true; return; }
    refresh();
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && samplesMissed) { samplesMissed = false; refresh(); }
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
