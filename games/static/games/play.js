/* Codemojex round page, progressively enhanced.
 * Without this script every tap is an ordinary form post and the page still
 * works. With it: keyboard taps, backspace and clear edit the draft in the
 * page (the same rule as games.forms.compose), a double click submits once,
 * "my guesses" are polled from a small JSON endpoint so a queued guess
 * turns into its score without a reload, and the same poll refreshes the
 * "In this round" panel (players, recent activity, the board around you).
 * The composer warns about a repeated emoji (the secret has none, so such a
 * guess can never be perfect; it is still taken and scored). After a round, the
 * share card gets a Copy button. A round's watch page refreshes its live part.
 *
 * Live push: a page whose <main> names a stream (data-stream, games.push)
 * opens it as an EventSource and applies what it pushes -- my guesses' scores,
 * the round's panel and board, the watch page's view, the lobby's counts, the
 * header's unread badge -- with the same code that applies a poll's answer.
 * While the stream is open the polls stand down; while it is not (no
 * EventSource, refused, dropped, or the server said "down") they run as
 * before, and the stream is tried again later. */
(function () {
  "use strict";

  var main = document.getElementById("main");
  var streamUrl = main ? main.getAttribute("data-stream") : "";
  var handlers = {};        // event name -> function (data)
  var pushWatchers = [];    // told when the stream opens (true) or is lost (false)
  var pushed = false;
  var onEvent = function (name, apply) { handlers[name] = apply; };
  var onPush = function (told) { pushWatchers.push(told); };
  var setPushed = function (on) {
    if (pushed === on) { return; }
    pushed = on;
    main.setAttribute("data-pushed", on ? "1" : "0");  // for whoever looks: is the page live now?
    pushWatchers.forEach(function (told) { told(on); });
  };

  // The header's unread badge, from any page's stream.
  onEvent("unread", function (data) {
    var link = document.querySelector("[data-notes]");
    if (!link) { return; }
    var badge = link.querySelector("[data-unread]");
    if (data.unread > 0) {
      if (!badge) {
        badge = document.createElement("span");
        badge.className = "badge";
        badge.setAttribute("data-unread", "");
        link.appendChild(document.createTextNode(" "));
        link.appendChild(badge);
      }
      badge.textContent = data.unread;
    } else if (badge) {
      badge.remove();
    }
    link.setAttribute("aria-label", "Notifications, " + data.unread + " unread");
  });

  var composer = document.querySelector("[data-composer]");
  if (composer) {
    var inputs = Array.prototype.slice.call(composer.querySelectorAll("[data-slot]"));
    var views = Array.prototype.slice.call(composer.querySelectorAll("[data-slot-view]"));
    var announce = composer.querySelector("[data-announce]");
    var free = inputs.map(function (el) { return !el.hasAttribute("data-locked"); });
    var names = {};
    Array.prototype.forEach.call(composer.querySelectorAll("button[name=key]"), function (b) {
      names[b.value] = b.getAttribute("aria-label");
    });

    var dupes = composer.querySelector("[data-dupes]");
    var warnDupes = function () {
      if (!dupes) { return; }
      var seen = {}, repeated = [];
      inputs.forEach(function (el) {
        var v = el.value;
        if (v && seen[v] && repeated.indexOf(v) < 0) { repeated.push(v); }
        seen[v] = true;
      });
      dupes.hidden = repeated.length === 0;
      dupes.textContent = repeated.length ? "⚠️ " + repeated.join(" ") + " appears twice. The secret has six " +
        "different emojis, so this guess cannot score 600 (it is still scored)." : "";
    };
    var render = function () {
      warnDupes();
      inputs.forEach(function (el, i) {
        var v = el.value, view = views[i];
        view.textContent = v || "·";
        view.classList.toggle("empty", !v);
        view.setAttribute("aria-label", "Position " + (i + 1) + ": " + (v ? (names[v] || v) : "empty") +
          (free[i] ? "" : " (locked)"));
      });
    };
    var say = function (text) { if (announce) { announce.textContent = text; } };

    var edit = function (name, value) {
      var i;
      if (name === "key") {
        for (i = 0; i < inputs.length; i++) {
          if (free[i] && !inputs[i].value) { inputs[i].value = value; say("Position " + (i + 1) + ": " + (names[value] || value)); return true; }
        }
        say("All six positions are filled.");
        return true;
      }
      if (name === "op" && value === "backspace") {
        for (i = inputs.length - 1; i >= 0; i--) {
          if (free[i] && inputs[i].value) { inputs[i].value = ""; say("Position " + (i + 1) + " cleared"); return true; }
        }
        return true;
      }
      if (name === "op" && value === "clear") {
        inputs.forEach(function (el, j) { if (free[j]) { el.value = ""; } });
        say("Guess cleared");
        return true;
      }
      return false;  // lock, unlock and guess go to the server
    };

    composer.addEventListener("click", function (event) {
      var button = event.target.closest("button");
      if (button && edit(button.name, button.value)) {
        event.preventDefault();
        render();
      }
    });
    composer.addEventListener("submit", function (event) {
      if (composer.dataset.busy) { event.preventDefault(); return; }  // a double click submits once
      composer.dataset.busy = "1";
    });
    window.addEventListener("pageshow", function () { delete composer.dataset.busy; });
    warnDupes();
  }

  var shareBox = document.querySelector("[data-share]");
  if (shareBox && navigator.clipboard) {
    var copy = shareBox.querySelector("[data-copy]");
    var copied = shareBox.querySelector("[data-copied]");
    copy.hidden = false;
    copy.addEventListener("click", function () {
      navigator.clipboard.writeText(shareBox.querySelector("[data-share-text]").textContent).then(
        function () { copied.textContent = "Copied."; },
        function () { copied.textContent = "Could not copy: select the text instead."; });
    });
  }

  // The full leaderboard page refreshes its table in place while the round
  // is open (the same HTML the server renders; no reload, no new endpoint).
  // Pushed, its rows are drawn from the stream's "board" (the same rows,
  // the reader's own marked by name); a change of the round reloads it.
  var table = document.querySelector("[data-live-table]");
  if (table && window.fetch && window.DOMParser) {
    var refreshTimer = null;
    var fetchTable = function () {
      return fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-live-table]");
          if (fresh) { table.innerHTML = fresh.innerHTML; table.dataset.open = fresh.dataset.open; }
          return fresh;
        });
    };
    var refresh = function () {
      refreshTimer = null;
      if (pushed || table.dataset.open !== "1") { return; }
      if (document.hidden) { refreshTimer = window.setTimeout(refresh, 5000); return; }
      fetchTable()
        .then(function (fresh) {
          if (!pushed && (!fresh || fresh.dataset.open === "1")) { refreshTimer = window.setTimeout(refresh, 5000); }
        })
        .catch(function () { refreshTimer = window.setTimeout(refresh, 10000); });
    };
    var cell = function (tag, text) {
      var el = document.createElement(tag);
      el.textContent = text;
      return el;
    };
    onEvent("board", function (data) {
      if (data.round.status !== table.dataset.status) { window.location.reload(); return; }
      var body = table.querySelector("tbody");
      if (!data.rows) { return; }
      if (!body) { if (data.rows.length) { fetchTable().catch(function () { return null; }); } return; }
      var me = body.parentNode.getAttribute("data-me"), ties = table.dataset.tiesShare === "1";
      body.textContent = "";
      data.rows.forEach(function (row) {
        var tr = document.createElement("tr"), mine = row.name === me;
        if (mine) { tr.className = "me"; tr.setAttribute("aria-current", "true"); }
        tr.appendChild(cell("td", ties ? row.place : row.rank));
        var name = cell("th", row.name + (mine ? " (you)" : ""));
        name.setAttribute("scope", "row");
        tr.appendChild(name);
        tr.appendChild(cell("td", row.total + "/600"));
        tr.appendChild(cell("td", row.percentage + "%"));
        body.appendChild(tr);
      });
    });
    onPush(function (on) {
      if (on && refreshTimer !== null) { window.clearTimeout(refreshTimer); refreshTimer = null; }
      if (!on && refreshTimer === null) { refreshTimer = window.setTimeout(refresh, 5000); }
    });
    if (table.dataset.open === "1") { refreshTimer = window.setTimeout(refresh, 5000); }
  }

  // The lobby: players per open round from the stream; a round opening or
  // closing redraws the table from the page itself.
  var lobby = document.querySelector("[data-lobby]");
  if (lobby && window.fetch && window.DOMParser) {
    onEvent("lobby", function (data) {
      if (data.rounds.join(" ") !== lobby.dataset.rounds) {
        fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
          .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
          .then(function (html) {
            var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-lobby]");
            if (fresh) { lobby.innerHTML = fresh.innerHTML; lobby.dataset.rounds = fresh.dataset.rounds; }
          })
          .catch(function () { return null; });
        return;
      }
      data.rounds.forEach(function (id) {
        var row = lobby.querySelector('[data-round="' + id + '"]');
        var n = data.playing[id];
        if (!row || n === undefined) { return; }
        var span = row.querySelector("[data-playing]");
        if (!span && n > 0) {
          span = document.createElement("span");
          span.setAttribute("data-playing", "");
          var pays = row.querySelector(".pays");
          pays.insertBefore(document.createTextNode(" · "), pays.firstChild);
          pays.insertBefore(span, pays.firstChild);
        }
        if (span) { span.textContent = n + " playing"; }
      });
    });
  }

  // A round's public watch page: its live part is replaced whole by the
  // fragment the poll answers (games.watch.fragment), every 3 s while the
  // round runs, 304 while nothing changed. applyWatch takes a view from
  // anywhere: a push (an event stream) can hand it the same JSON.
  var watchBox = document.querySelector("[data-watch]");
  if (watchBox && window.fetch) {
    var watchVersion = watchBox.dataset.version;
    var applyWatch = function (data) {
      if (!data || data.version === watchVersion) { return; }
      watchVersion = data.version;
      watchBox.innerHTML = data.html;
      watchBox.dataset.open = (data.round.status === "open" || data.round.status === "revealing") ? "1" : "0";
    };
    window.codemojexWatch = applyWatch;
    onEvent("watch", applyWatch);
    var watchTimer = null;
    var watchLater = function (ms) { watchTimer = window.setTimeout(watchPoll, ms); };
    var watchPoll = function () {
      watchTimer = null;
      if (pushed) { return; }
      if (document.hidden) { watchLater(3000); return; }
      fetch(watchBox.dataset.url, { headers: { Accept: "application/json", "If-None-Match": 'W/"' + watchVersion + '"' },
                                    cache: "no-store" })
        .then(function (r) {
          if (r.status === 304) { return null; }
          if (!r.ok) { throw new Error(r.status); }
          return r.json();
        })
        .then(function (data) {
          applyWatch(data);
          if (watchBox.dataset.open === "1" && !pushed) { watchLater(3000); }
        })
        .catch(function () { watchLater(10000); });
    };
    onPush(function (on) {
      if (on && watchTimer !== null) { window.clearTimeout(watchTimer); watchTimer = null; }
      if (!on && watchTimer === null && watchBox.dataset.open === "1") { watchLater(3000); }
    });
    if (watchBox.dataset.open === "1") { watchLater(3000); }
  }

  var list = document.querySelector("[data-my-guesses]");
  if (!list || !window.fetch) { connect(); return; }
  var initialStatus = list.dataset.status;
  var open = list.dataset.open === "1";

  var resultText = function (g) {
    if (g.total !== null) { return null; }
    if (g.status === "sealed") { return "sealed until the reveal"; }
    return g.status;
  };
  var showRow = function (g) {
    var li = list.querySelector('[data-guess="' + g.id + '"]');
    if (!li) {
      li = document.createElement("li");
      li.dataset.guess = g.id;
      li.classList.add("new");
      var emojis = document.createElement("span");
      emojis.className = "emojis";
      emojis.textContent = g.emojis.join(" ");
      var result = document.createElement("span");
      result.className = "result";
      result.setAttribute("data-result", "");
      li.appendChild(emojis);
      li.appendChild(result);
      list.insertBefore(li, list.firstChild);
      var empty = document.querySelector("[data-empty]");
      if (empty) { empty.remove(); }
    }
    li.className = "guess status-" + g.status + (li.classList.contains("new") ? " new" : "");
    var cell = li.querySelector("[data-result]");
    var text = resultText(g);
    if (text === null) {
      cell.textContent = "";
      var strong = document.createElement("strong");
      strong.textContent = g.total;
      cell.appendChild(strong);
      cell.appendChild(document.createTextNode("/600 · " + g.percentage + "%"));
    } else {
      cell.textContent = text;
    }
  };
  var best = document.querySelector("[data-best]");
  var showBest = function (value) {
    if (best && value !== null && value !== undefined) { best.textContent = value + "/600"; }
  };
  var panel = document.querySelector("[data-live]");
  var setText = function (sel, text) {
    var el = panel && panel.querySelector(sel);
    if (el) { el.textContent = text; }
  };
  var boardRow = function (row) {
    var li = document.createElement("li");
    li.value = row.rank;
    if (row.me) { li.className = "me"; }
    var name = document.createElement("span");
    name.textContent = row.name + (row.me ? " (you)" : "");
    var total = document.createElement("span");
    total.className = "num";
    total.textContent = row.total;
    li.appendChild(name);
    li.appendChild(document.createTextNode(" "));
    li.appendChild(total);
    return li;
  };
  var showLive = function (live) {
    if (!panel || !live) { return; }
    setText("[data-live-players]", live.players);
    setText("[data-live-recent]", live.recent_words);
    var board = panel.querySelector("[data-live-board]");
    if (!board) { return; }
    board.textContent = "";
    live.top.forEach(function (row) { board.appendChild(boardRow(row)); });
    if (live.around.length) {
      var gap = document.createElement("li");
      gap.className = "gap";
      gap.setAttribute("aria-hidden", "true");
      gap.textContent = "…";
      board.appendChild(gap);
      live.around.forEach(function (row) { board.appendChild(boardRow(row)); });
    }
    var empty = panel.querySelector("[data-live-empty]");
    if (empty && live.top.length) { empty.remove(); }
  };
  var pending = function () { return list.querySelector(".status-queued") !== null; };

  var timer = null;
  var etag = null;
  var schedule = function () {
    // Fast while a guess is being scored or the round is closing; slower
    // while open (to notice another player cracking it, and to refresh the
    // board); stop when over.
    var closing = !open && initialStatus === "open";
    if (pushed || (!pending() && !open && !closing)) { return; }
    // 400 ms while a guess is being scored keeps scored -> visible under 1 s
    // (p99, measured by bench/live_poll.py).
    timer = window.setTimeout(poll, pending() ? 400 : closing ? 1000 : 3000);
  };
  // What a poll answers and the stream's "mine" alike; "panel", the
  // others' part alone (a rival scored).
  var apply = function (data) {
    if (data.round.status !== initialStatus) { window.location.reload(); return; }
    if (data.guesses) {
      data.guesses.slice().reverse().forEach(showRow);
      showBest(data.best);
    }
    showLive(data.live);
  };
  onEvent("mine", apply);
  onEvent("panel", apply);
  onPush(function (on) {
    if (on && timer !== null) { window.clearTimeout(timer); timer = null; }
    if (!on && timer === null) { schedule(); }
  });
  var poll = function () {
    timer = null;
    if (pushed) { return; }
    if (document.hidden) { schedule(); return; }
    var headers = { Accept: "application/json" };
    if (etag) { headers["If-None-Match"] = etag; }  // unchanged -> 304, the server reads nothing
    fetch(list.dataset.url, { headers: headers, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 304) { return null; }
        if (!r.ok) { throw new Error(r.status); }
        etag = r.headers.get("ETag");
        return r.json();
      })
      .then(function (data) {
        if (data === null) { schedule(); return; }
        apply(data);
        schedule();
      })
      .catch(function () { timer = window.setTimeout(poll, 5000); });
  };
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer === null && !pushed) { poll(); }
  });
  schedule();
  connect();

  // The stream itself: opened once the page's parts have said what they
  // take. Lost, the polls run; refused or told "down", tried again later.
  function connect() {
    if (!streamUrl || !window.EventSource) { return; }
    var source = new EventSource(streamUrl, { withCredentials: true });
    var again = function (ms) {
      source.close();
      setPushed(false);
      window.setTimeout(connect, ms);
    };
    source.onopen = function () { setPushed(true); };
    source.onerror = function () {
      if (source.readyState === 2) { again(30000); } else { setPushed(false); }  // 2: CLOSED, refused
    };
    source.addEventListener("down", function () { again(30000); });
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (event) {
        var data;
        try { data = JSON.parse(event.data); } catch (err) { return; }
        handlers[name](data);
      });
    });
  }
})();
