// benchlab ui: the live part of every page, fetched again when its benchmark's version moves.
(function () {
  "use strict";
  var POLL_MS = 1000;
  var main = document.getElementById("live");
  var state = document.getElementById("live-state");
  var bench = main ? main.dataset.bench : null;
  var busy = false;
  var shown = null;  // the live part's text as last fetched

  function versionOf(data) {
    return bench === "*" ? data.version : data.benchmarks[bench];
  }

  // Asks with the version shown: 204 while the server has nothing newer (it makes a costly view
  // again only every so often while a sweep runs), so nothing is sent, parsed or laid out.
  function withHave(url, version) {
    return version ? url + (url.indexOf("?") < 0 ? "?" : "&") + "have=" + encodeURIComponent(version) : url;
  }

  function refresh() {
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return fetch(withHave(url.toString(), main.dataset.version), {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      if (r.status === 204) { return; }
      var version = r.headers.get("X-Version");
      return r.text().then(function (text) {
        if (text !== shown) { main.innerHTML = text; shown = text; }  // the same text: nothing to lay out
        main.dataset.version = version;
        document.dispatchEvent(new CustomEvent("benchlab:update", {detail: {version: version}}));
      });
    }).finally(function () { busy = false; });
  }

  function poll() {
    if (busy || !main) { return; }
    fetch("/api/changes", {cache: "no-store"}).then(function (r) { return r.json(); }).then(function (data) {
      state.className = "live-state on";
      state.textContent = "live";
      var v = versionOf(data);
      if (v !== undefined && String(v) !== main.dataset.version) { return refresh(); }
    }).catch(function () {
      state.className = "live-state off";
      state.textContent = "server unreachable";
    });
  }

  if (main) { window.setInterval(poll, POLL_MS); }

  // One "ask again later" at a time: every change of a live sweep asks for the costly views, and
  // each answer that is older than the page asked for a timer of its own, so their number grew by
  // one a second for as long as the sweep ran.
  function once() {
    var pending = null;
    return {
      ask: function (f, ms) {
        if (pending !== null) { return; }
        pending = window.setTimeout(function () { pending = null; f(); }, ms);
      },
      // A change while it waits changes nothing: the server makes the view again only after a while.
      waiting: function () { return pending !== null; }
    };
  }

  // A benchmark's page: the report's tables, fetched apart (at 10,000 runs they take seconds),
  // again after each change, one fetch at a time.
  window.benchlabNumbers = function () {
    var box = document.getElementById("numbers");
    var later = once();
    var loading = false;
    var again = false;
    function load() {
      if (loading) { again = true; return; }
      loading = true;
      fetch(withHave(box.dataset.src, box.dataset.version), {cache: "no-store"}).then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        var version = r.headers.get("X-Version");
        // Served from before the page's last change (the tables are recomputed at most every
        // few seconds while a sweep runs): ask again shortly, even if nothing else changes.
        var behind = function () {
          if (Number(version) < Number(main.dataset.version)) { later.ask(load, 2000); }
        };
        if (r.status === 204) { behind(); return; }
        return r.text().then(function (text) {
          box.innerHTML = text;
          box.dataset.version = version;
          behind();
        });
      }).catch(function () {}).finally(function () {
        loading = false;
        if (again) { again = false; load(); }
      });
    }
    load();
    document.addEventListener("benchlab:update", function () { if (!later.waiting()) { load(); } });
  };

  // A run's page: the log follows its end while the reader is at the end.
  window.benchlabFollowLog = function () {
    function log() { return document.getElementById("log"); }
    var atEnd = true;
    function stick() { var el = log(); if (el && atEnd) { el.scrollTop = el.scrollHeight; } }
    document.addEventListener("scroll", function () {}, true);
    main.addEventListener("scroll", function (e) {
      var el = e.target;
      if (el && el.id === "log") { atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 4; }
    }, true);
    stick();
    document.addEventListener("benchlab:update", stick);
  };

  // The curves page: mean, 95% band and seeds per config, redrawn when runs log.
  window.benchlabCurves = function () {
    var plot = document.getElementById("plot");
    var curve = document.getElementById("curve");
    var xaxis = document.getElementById("xaxis");
    var seeds = document.getElementById("seeds");
    var note = document.getElementById("curve-note");
    var hidden = {};
    var data = null;
    var drawn = null;  // the "task|metric" whose data is drawn
    var later = once();
    var loading = false;

    function rgba(hex, a) {
      var n = parseInt(hex.slice(1), 16);
      return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
    }

    function bookmark() {
      var url = new URL(window.location.href);
      url.searchParams.set("task", plot.dataset.task);
      url.searchParams.set("metric", plot.dataset.metric);
      url.searchParams.set("x", xaxis.value);
      url.searchParams.set("seeds", seeds.checked ? "1" : "0");
      url.searchParams.delete("fragment");
      window.history.replaceState(null, "", url.toString());
    }

    function draw() {
      if (!data) { return; }
      var useTime = xaxis.value === "time";
      var traces = [];
      var points = 0;
      var seedLines = 0;
      data.configs.forEach(function (c, i) {
        var color = c.color;  // the report's palette, chosen by the server
        var off = !!hidden[c.name];
        var xs = useTime ? c.t : c.x;
        var legendShown = false;
        if (c.n > 0 && xs && xs.length) {
          traces.push({x: xs.concat(xs.slice().reverse()), y: c.high.concat(c.low.slice().reverse()),
                       type: "scatter", mode: "lines", fill: "toself", fillcolor: rgba(color, 0.18),
                       line: {width: 0}, hoverinfo: "skip", showlegend: false, legendgroup: c.name,
                       name: c.name + " 95% band", visible: off ? false : true});
          traces.push({x: xs, y: c.mean, type: "scatter", mode: "lines", line: {color: color, width: 2.5},
                       name: c.name + " (n=" + c.n + ")", legendgroup: c.name, meta: c.name,
                       visible: off ? "legendonly" : true});
          legendShown = true;
          points += c.mean.length;
        }
        c.seeds.forEach(function (s) {
          var sx = useTime ? s.t : s.x;
          if (!sx) { return; }
          var first = !legendShown;
          legendShown = true;
          var visible = off ? (first ? "legendonly" : false) : (seeds.checked || first);
          traces.push({x: sx, y: s.y, type: "scatter", mode: "lines",
                       line: {color: color, width: 0.8, dash: s.state === "running" ? "dot" : "solid"},
                       opacity: 0.55, name: first ? c.name + " (running)" : c.name + " seed " + s.seed,
                       legendgroup: c.name, meta: c.name, showlegend: first, visible: visible,
                       hovertemplate: c.name + " seed " + s.seed + " (" + s.state + ")<br>%{x}: %{y}<extra></extra>"});
          if (visible === true) { seedLines += 1; points += s.y.length; }
        });
      });
      var layout = {
        margin: {l: 60, r: 20, t: 30, b: 50}, height: 520, uirevision: "keep",
        legend: {orientation: "h", y: 1.08},
        xaxis: {title: {text: useTime ? "wall time since the run started, s (estimated)" : "step"}},
        yaxis: {title: {text: data.metric + (data.goal ? " (" + (data.goal === "max" ? "higher" : "lower") +
                               " is better)" : "")}}
      };
      window.Plotly.react(plot, traces, layout, {displaylogo: false, responsive: true});
      plot.dataset.points = String(points);
      plot.dataset.seedLines = String(seedLines);
      plot.dataset.hidden = Object.keys(hidden).filter(function (k) { return hidden[k]; }).join(",");
      var running = 0;
      data.configs.forEach(function (c) { c.seeds.forEach(function (s) { if (s.state === "running") { running++; } }); });
      note.textContent = running ? running + " running run(s) drawn as they log" : "";
    }

    function load() {
      if (loading) { return; }
      loading = true;
      var url = "/b/" + encodeURIComponent(plot.dataset.bench) + "/curves.json?task=" +
        encodeURIComponent(plot.dataset.task) + "&metric=" + encodeURIComponent(plot.dataset.metric);
      var asked = plot.dataset.task + "|" + plot.dataset.metric;
      var have = asked === drawn ? plot.dataset.version : null;
      fetch(withHave(url, have), {cache: "no-store"}).then(function (r) {
        var version = Number(r.headers.get("X-Version"));
        if (r.status === 204) { return version; }
        return r.json().then(function (d) {
          data = d;
          drawn = asked;
          plot.dataset.version = String(d.version);
          draw();
          return d.version;
        });
      }).then(function (version) {
        if (version < Number(main.dataset.version)) { later.ask(load, 1200); }
      }).finally(function () { loading = false; });
    }

    curve.addEventListener("change", function () {
      var parts = curve.value.split("|");
      plot.dataset.task = parts[0];
      plot.dataset.metric = parts.slice(1).join("|");
      hidden = {};
      bookmark();
      load();
    });
    xaxis.addEventListener("change", function () { bookmark(); draw(); });
    seeds.addEventListener("change", function () { bookmark(); draw(); });
    plot.addEventListener("plotly_legendclick", function () {});
    load();
    document.addEventListener("benchlab:update", function () { if (!later.waiting()) { load(); } });
    var wired = false;
    var wire = window.setInterval(function () {
      if (wired || !plot.on) { return; }
      wired = true;
      window.clearInterval(wire);
      plot.on("plotly_legendclick", function (e) {
        var name = e.data[e.curveNumber].meta;
        hidden[name] = !hidden[name];
        draw();
        return false;
      });
      plot.on("plotly_legenddoubleclick", function () { return false; });
    }, 100);
  };
})();
