// toolcards dashboard: live updates over Server-Sent Events. No inline script, no eval, no
// third-party code. Every model- or user-supplied text is set with textContent; panels are
// re-fetched as HTML rendered (and escaped) by the server.
"use strict";
(function () {
  var body = document.body;
  var base = body.dataset.base || "";  // the dashboard's secret path: every URL is under it
  var liveState = document.getElementById("live-state");
  var inflight = {};
  var dirty = {};
  var lastSeq = {};

  function setState(text, on) {
    if (!liveState) return;
    liveState.textContent = text;
    liveState.classList.toggle("on", on);
  }

  function panelUrl(name) {
    var params = new URLSearchParams(window.location.search);
    var card = document.querySelector('[data-watch][data-panel="' + name + '"]');
    if (card && params.get("q")) return base + "/panel/" + name + "?q=" + encodeURIComponent(params.get("q"));
    if (name === "audit") return base + "/panel/audit" + window.location.search;
    return base + "/panel/" + name;
  }

  // A panel is not replaced under the person's hands: not while it holds an open edit or
  // remember form (an approver editing a call's arguments, or choosing what a grant covers;
  // refreshed once they close it), nor while a
  // button is pressed (a click whose press and release land on different elements, the old
  // panel's and the new one's, is no click: the link or button would not answer).
  var held = {};
  var pressed = false;
  function editing(section) {
    return section.querySelector("details.edit[open], details.remember[open]") !== null;
  }
  function busy(section) {
    return pressed || editing(section);
  }
  function releaseHeld() {
    Object.keys(held).forEach(function (name) {
      var section = document.querySelector('[data-panel="' + name + '"]');
      if (held[name] && section && !busy(section)) { held[name] = false; refresh(name); }
    });
  }
  document.addEventListener("toggle", releaseHeld, true);
  document.addEventListener("pointerdown", function () { pressed = true; }, true);
  ["pointerup", "pointercancel"].forEach(function (type) {
    document.addEventListener(type, function () {
      // after the click this release makes has been handled
      setTimeout(function () { pressed = false; releaseHeld(); }, 0);
    }, true);
  });

  function refresh(name) {
    var section = document.querySelector('[data-panel="' + name + '"]');
    if (!section) return;
    if (busy(section)) { held[name] = true; return; }
    if (inflight[name]) { dirty[name] = true; return; }
    inflight[name] = true;
    fetch(panelUrl(name), { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error(String(r.status))); })
      .then(function (html) {
        if (busy(section)) { held[name] = true; return; }  // pressed or opened meanwhile
        var doc = new DOMParser().parseFromString(html, "text/html");
        section.replaceChildren.apply(section, Array.prototype.slice.call(doc.body.childNodes));
        section.dispatchEvent(new CustomEvent("panel:updated", { bubbles: true }));
        updateAgo();
      })
      .catch(function () { /* the next event or reconnect refreshes it */ })
      .finally(function () {
        inflight[name] = false;
        if (dirty[name]) { dirty[name] = false; refresh(name); }
      });
  }

  function clock(ts) {
    var d = new Date(ts * 1000);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  function span(cls, text, tag) {
    var el = document.createElement(tag || "span");
    el.className = cls;
    el.textContent = text;
    return el;
  }

  function addEvent(ev) {
    var list = document.getElementById("events");
    if (!list) return;
    var li = document.createElement("li");
    li.dataset.testid = "event";
    li.dataset.eventId = ev.id || "";
    li.dataset.displayType = ev.display_type || "";
    li.className = "fresh";
    if (ev.lifecycle) {  // hidden unless the person asks for them (the checkbox above the list)
      li.classList.add("lifecycle");
      var count = document.getElementById("lifecycle-count");
      if (count) count.textContent = String(parseInt(count.textContent, 10) + 1);
    }
    li.append(span("time", clock(ev.ts)), " ", span("tool", ev.tool_id, "code"), " ",
      span("seq", "#" + ev.seq));
    if (ev.sender) li.append(" ", span("sender", "by " + ev.sender));
    li.append(" ", span("text", ev.text));
    list.prepend(li);
    while (list.children.length > 200) list.lastElementChild.remove();
  }

  // the cards' panels name the tool actors whose events change them (data-watch)
  function watching() {
    return Array.prototype.map.call(document.querySelectorAll("[data-watch]"),
      function (el) { return el.dataset.panel; });
  }

  function panelsFor(tool) {
    var found = Array.prototype.filter.call(document.querySelectorAll("[data-watch]"),
      function (el) { return el.dataset.watch.split(" ").indexOf(tool) >= 0; });
    return found.map(function (el) { return el.dataset.panel; }).concat(["team"]);
  }

  function updateAgo() {
    var now = Date.now() / 1000;
    document.querySelectorAll("[data-ago]").forEach(function (el) {
      var s = Math.max(0, now - parseFloat(el.dataset.ago));
      el.textContent = s < 60 ? Math.round(s) + " s ago" : s < 3600 ? Math.round(s / 60) + " min ago"
        : (s / 3600).toFixed(1) + " h ago";
    });
  }

  setInterval(updateAgo, 1000);
  if (!window.EventSource || body.dataset.position === undefined) return;

  var connectedBefore = false;
  var source = new EventSource(base + "/events?since=" + encodeURIComponent(body.dataset.position));
  source.addEventListener("hello", function () {
    setState("live", true);
    if (connectedBefore) ["team", "approvals"].concat(watching()).forEach(refresh);
    connectedBefore = true;
  });
  source.addEventListener("team", function (e) {
    var ev = JSON.parse(e.data);
    if (lastSeq[ev.tool_id] !== undefined && ev.seq <= lastSeq[ev.tool_id]) return;
    lastSeq[ev.tool_id] = ev.seq;
    addEvent(ev);
    panelsFor(ev.tool_id).forEach(refresh);
    refresh("budgets");
  });
  source.addEventListener("approvals", function (e) {
    var count = document.getElementById("approval-count");
    if (count) count.textContent = String(JSON.parse(e.data).count);
    refresh("approvals");
    if (!new URLSearchParams(window.location.search).get("before")) refresh("audit");
    refresh("budgets");
  });
  source.addEventListener("resync", function () {
    ["team", "approvals", "budgets", "audit"].concat(watching()).forEach(refresh);
  });
  source.onerror = function () { setState("reconnecting", false); };
})();
