package e2e

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// TestPhoneViewport: on a phone-sized screen (390×844 CSS pixels, as a recent iPhone) the
// overview, a queue's page, the bulk page and the workflow pages fit the width: nothing makes
// the page scroll sideways (wide tables scroll inside their own box).
func TestPhoneViewport(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for _, name := range []string{"emails", "reports-with-a-rather-long-name", "webhooks"} {
		enqueue(t, queue(t, e.client, name), "ada@example.com", nil)
	}
	wf := e.client.NewWorkflow("a-workflow-with-a-rather-long-name")
	wf.Metadata = map[string]string{"customer": "ada.lovelace.countess.of.lovelace@example.org"}
	first := queue(t, e.client, "emails").AddStep(wf, email{To: "ada@example.com"}, &pgqueue.StepOptions{Name: "a-step-with-a-rather-long-name"})
	queue(t, e.client, "webhooks").AddStep(wf, email{To: "ada@example.com"}, &pgqueue.StepOptions{After: pgqueue.After(first)})
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	if err := wf.Enqueue(ctx); err != nil {
		t.Fatalf("enqueueing the workflow: %v", err)
	}

	p := e.page
	p.resize(390, 844, true)
	for _, path := range []string{"/", "/queues/emails", "/bulk", "/workflows", "/workflows/" + wf.ID.String()} {
		p.open(path)
		p.waitVisible("main")
		overflow := p.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`, "the overflow")
		if n, err := strconv.Atoi(overflow); err != nil || n > 0 {
			wide := p.eval(`[...document.querySelectorAll("body *")]
				.filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
				.filter(e => !e.closest(".scroll"))
				.slice(0, 5).map(e => e.tagName + (e.dataset.testid ? "[" + e.dataset.testid + "]" : "") + "." + e.className).join(", ")`, "the wide elements")
			t.Errorf("%s overflows a 390 px wide screen by %s px; wide elements: %s", path, overflow, wide)
		}
	}
}

// TestDarkMode: with the system in dark mode the pages turn dark, with light text: readable.
func TestDarkMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	enqueue(t, queue(t, e.client, "emails"), "ada@example.com", nil)

	p := e.page
	p.darkMode()
	for _, path := range []string{"/", "/queues/emails"} {
		p.open(path)
		p.waitVisible("main")
		bg := luminance(t, p.eval(backgroundJS, "the background"))
		fg := luminance(t, p.eval(`getComputedStyle(document.querySelector("main")).color`, "the text color"))
		if bg > 0.2 || fg < 0.5 {
			t.Errorf("%s in dark mode: background luminance %.2f, text %.2f; want a dark background (≤ 0.2) and light text (≥ 0.5)", path, bg, fg)
		}
	}
}

// luminance returns the relative luminance (0 black, 1 white) of a CSS color "rgb(r, g, b)" or
// "rgba(r, g, b, a)", as computed styles give it.
func luminance(t *testing.T, color string) float64 {
	t.Helper()
	inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(color, "rgba("), "rgb("), ")")
	parts := strings.Split(inner, ",")
	if len(parts) < 3 {
		t.Fatalf("color %q is not rgb(…)", color)
	}
	var c [3]float64
	for i := range c {
		v, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 64)
		if err != nil {
			t.Fatalf("color %q: %v", color, err)
		}
		c[i] = linear(v / 255)
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

// linear turns an sRGB channel (0 to 1) into linear light, as WCAG's relative luminance does.
func linear(v float64) float64 {
	if v <= 0.03928 {
		return v / 12.92
	}
	return math.Pow((v+0.055)/1.055, 2.4)
}

// backgroundJS is the color behind the page's main text: that of the first element from main
// up with a background that is not transparent, else the canvas's (dark where the page's
// color-scheme allows dark and the system prefers it, as Chromium paints it).
const backgroundJS = `(() => {
	for (let e = document.querySelector("main"); e; e = e.parentElement) {
		const c = getComputedStyle(e).backgroundColor;
		if (c !== "transparent" && !/^rgba\(.*,\s*0\)$/.test(c)) return c;
	}
	const dark = getComputedStyle(document.documentElement).colorScheme.includes("dark") &&
		matchMedia("(prefers-color-scheme: dark)").matches;
	return dark ? "rgb(18, 18, 18)" : "rgb(255, 255, 255)";
})()`
