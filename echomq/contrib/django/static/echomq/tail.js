// The queue dashboard's live tail of events: every 2 s, ask the page's own
// URL for the events after the last cursor (format=json, same filters) and
// put them on top of the table, keeping at most data-limit rows. Rows are
// built with textContent only: nothing from the stream becomes markup.
(function () {
  "use strict";
  var table = document.getElementById("emq-events");
  if (!table) return;
  var body = table.tBodies[0], state = document.getElementById("emq-tail-state");
  var toggle = document.getElementById("emq-tail-toggle");
  var cursor = table.dataset.cursor, limit = parseInt(table.dataset.limit, 10) || 50;
  var paused = false, timer = null, EVERY = 2000;

  function cell(row, text, cls) {
    var td = row.insertCell(-1);
    if (cls) td.className = cls;
    if (text !== null) td.textContent = text;
    return td;
  }

  function link(td, href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    td.appendChild(a);
  }

  function add(events) {
    var none = body.querySelector(".emq-none");
    if (events.length && none) none.remove();
    for (var i = events.length - 1; i >= 0; i--) {  // newest first: the oldest goes in first
      var e = events[i], row = body.insertRow(0);
      cell(row, e.at.slice(11, 23));
      var badge = document.createElement("span");
      badge.className = "emq-badge " + e.type;
      badge.textContent = e.type;
      cell(row, null).appendChild(badge);
      link(cell(row, null, "id"), e.url, e.job);
      cell(row, e.lane || "\u2014", "id emq-hide-sm");
      cell(row, String(e.attempt));
      cell(row, e.data_text, "emq-mono emq-err");
    }
    while (body.rows.length > limit) body.deleteRow(body.rows.length - 1);
  }

  function poll() {
    timer = null;
    if (paused) return;
    var q = table.dataset.query ? table.dataset.query + "&" : "";
    fetch(table.dataset.url + "?" + q + "format=json&after=" + encodeURIComponent(cursor),
          {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) {
        if (r.status === 410) throw new Error("the stream was trimmed past this page: reload it");
        if (!r.ok) throw new Error("the server answered " + r.status);
        return r.json();
      })
      .then(function (data) {
        add(data.events);
        cursor = data.cursor;
        state.textContent = "Live: last looked " + new Date().toLocaleTimeString();
        timer = setTimeout(poll, EVERY);
      })
      .catch(function (err) {
        state.textContent = "Stopped: " + err.message;
      });
  }

  toggle.hidden = false;
  toggle.addEventListener("click", function () {
    paused = !paused;
    toggle.textContent = paused ? "Resume" : "Pause";
    state.textContent = paused ? "Paused" : "Live";
    if (!paused && !timer) poll();
  });
  timer = setTimeout(poll, EVERY);
})();
