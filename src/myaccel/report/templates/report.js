// myaccel report: sortable tables, flame graph zoom, open details for printing.
// No network, no libraries.
(function () {
  "use strict";

  function cellKey(td) {
    if (!td) { return ""; }
    var raw = td.getAttribute("data-value");
    if (raw !== null && raw !== "") {
      var n = parseFloat(raw);
      if (!isNaN(n)) { return n; }
    }
    var text = td.textContent.trim();
    var num = parseFloat(text.replace(/[,%+\[\]]/g, ""));
    return (!isNaN(num) && /^[-+\[]?[\d.,]+/.test(text)) ? num : text.toLowerCase();
  }

  function makeSortable(table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.setAttribute("title", "Sort by this column");
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        if (!body) { return; }
        var asc = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellKey(a.cells[col]), y = cellKey(b.cells[col]);
          if (typeof x === "number" && typeof y === "number") { return asc ? x - y : y - x; }
          x = String(x); y = String(y);
          return asc ? x.localeCompare(y) : y.localeCompare(x);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  var WIDTH = 1200, CHAR = 6.6;

  function zoomFlame(svg, frame) {
    var x0 = frame ? parseFloat(frame.getAttribute("data-x")) : 0;
    var w0 = frame ? parseFloat(frame.getAttribute("data-w")) : 1;
    var d0 = frame ? parseInt(frame.getAttribute("data-d"), 10) : 0;
    svg.querySelectorAll("g.fg").forEach(function (g) {
      var x = parseFloat(g.getAttribute("data-x"));
      var w = parseFloat(g.getAttribute("data-w"));
      var d = parseInt(g.getAttribute("data-d"), 10);
      var rect = g.querySelector("rect"), text = g.querySelector("text");
      var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9;
      var below = d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
      if (!inside && !below) { g.style.display = "none"; return; }
      g.style.display = "";
      var nx = below ? 0 : (x - x0) / w0 * WIDTH;
      var nw = below ? WIDTH : w / w0 * WIDTH;
      g.style.opacity = below ? "0.6" : "1";
      rect.setAttribute("x", nx.toFixed(1));
      rect.setAttribute("width", Math.max(nw - 0.5, 0.1).toFixed(1));
      text.setAttribute("x", (nx + 3).toFixed(1));
      var name = g.querySelector("title").textContent.replace(/: \d+ samples.*$/, "");
      var chars = Math.floor((nw - 6) / CHAR);
      text.textContent = chars < 3 ? "" : (name.length <= chars ? name : name.slice(0, chars - 2) + "..");
    });
  }

  function setupFlame(svg) {
    svg.addEventListener("click", function (ev) {
      var g = ev.target.closest ? ev.target.closest("g.fg") : null;
      if (g) { zoomFlame(svg, g.getAttribute("data-d") === "0" ? null : g); }
    });
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  document.querySelectorAll("svg.flame").forEach(setupFlame);
  document.querySelectorAll("button.flame-reset").forEach(function (b) {
    b.addEventListener("click", function () {
      var svg = document.getElementById(b.getAttribute("data-target"));
      if (svg) { zoomFlame(svg, null); }
    });
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
}());
