/* fwgym report: sortable tables, tabs (with the figures that follow them), a table filter, transcript
   toggles and cell labels for the phone layout. No dependencies. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  /* every body cell gets its column's header text as data-label (the phone layout shows it) */
  document.querySelectorAll("table").forEach(function (table) {
    var head = table.tHead && table.tHead.rows[0];
    if (!head) return;
    var names = Array.prototype.map.call(head.cells, function (th) { return th.textContent.replace(/\s+/g, " ").trim(); });
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        Array.prototype.forEach.call(row.cells, function (cell, i) {
          if (names[i] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", names[i]);
        });
      });
    });
  });

  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? NaN : "";
    var v = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return v.toLowerCase();
    var x = parseFloat(v);
    return isNaN(x) ? NaN : x;
  }

  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0];
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-sort") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, index, numeric), y = cellKey(b, index, numeric);
      if (numeric) {  /* empty cells last in either direction */
        if (isNaN(x) && isNaN(y)) return 0;
        if (isNaN(x)) return 1;
        if (isNaN(y)) return -1;
        return sign * (x - y);
      }
      return sign * (x < y ? -1 : x > y ? 1 : 0);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  document.querySelectorAll("table.sortable th[data-sort]").forEach(function (th) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th); }
    });
  });

  document.querySelectorAll(".tabs").forEach(function (bar) {
    var buttons = bar.querySelectorAll("[role=tab]");
    function show(btn) {
      var id = (btn.getAttribute("aria-controls") || "").replace(/^tab-/, "");
      buttons.forEach(function (b) {
        var on = b === btn, panel = document.getElementById(b.getAttribute("aria-controls"));
        b.setAttribute("aria-selected", on ? "true" : "false");
        b.tabIndex = on ? 0 : -1;
        if (panel) panel.hidden = !on;
      });
      /* figures drawn for one tab's cases (the frontier) follow the selected tab */
      document.querySelectorAll("[data-tab-for]").forEach(function (el) {
        el.hidden = el.getAttribute("data-tab-for") !== id;
      });
    }
    buttons.forEach(function (b, i) {
      b.addEventListener("click", function () { show(b); });
      /* WAI-ARIA tabs: arrow keys move to (and select) the previous / next tab, Home / End the first / last */
      b.addEventListener("keydown", function (e) {
        var n = buttons.length, k = {ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1,
                                      Home: 0, End: n - 1}[e.key];
        if (k === undefined) return;
        e.preventDefault();
        var to = buttons[(k + n) % n];
        show(to);
        to.focus();
      });
    });
    var first = bar.querySelector("[aria-selected=true]") || buttons[0];
    if (first) show(first);
  });

  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-filter"));
    if (!table) return;
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  });

  function toggleAll(id, open) {
    var box = document.getElementById(id);
    if (box) box.querySelectorAll("details.msg").forEach(function (d) { d.open = open; });
  }
  document.querySelectorAll("[data-toggle-all]").forEach(function (b) {
    b.addEventListener("click", function () { toggleAll(b.getAttribute("data-toggle-all"), true); });
  });
  document.querySelectorAll("[data-collapse-all]").forEach(function (b) {
    b.addEventListener("click", function () { toggleAll(b.getAttribute("data-collapse-all"), false); });
  });
})();
