// pytest-super HTML report: sorting and filtering of the task tables, inlined into every page.
// Filters read and write the page's #hash (e.g. #outcome=failed&set=masked), so a filtered view
// can be linked to and reopened.
(function () {
  "use strict";

  function sortValue(cell, type) {
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    if (type === "text") return raw.toLowerCase();
    var n = parseFloat(raw);
    return isNaN(n) ? -Infinity : n;
  }

  function makeSortable(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, index) {
      th.addEventListener("click", function () {
        var type = th.getAttribute("data-type") || "number";
        var descending = !th.classList.contains("desc") && th.classList.contains("asc");
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(descending ? "desc" : "asc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = sortValue(a.cells[index], type), y = sortValue(b.cells[index], type);
          var order = x < y ? -1 : x > y ? 1 : 0;
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  function readHash() {
    var state = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
      if (!pair) return;
      var kv = pair.split("=");
      state[decodeURIComponent(kv[0])] = decodeURIComponent(kv[1] || "");
    });
    return state;
  }

  function setupFilters(form, table) {
    var fields = Array.prototype.slice.call(form.elements).filter(function (e) { return e.name; });
    var shown = document.getElementById("shown");

    function value(field) {
      return field.type === "checkbox" ? (field.checked ? field.value : "") : field.value;
    }

    function apply() {
      var state = {};
      fields.forEach(function (f) { if (value(f)) state[f.name] = value(f); });
      var visible = 0, rows = table.tBodies[0].rows;
      Array.prototype.forEach.call(rows, function (row) {
        var keep = Object.keys(state).every(function (name) {
          var want = state[name];
          if (name === "q") return row.getAttribute("data-task").toLowerCase().indexOf(want.toLowerCase()) >= 0;
          var have = (row.getAttribute("data-" + name) || "").split(",");
          return have.indexOf(want) >= 0;
        });
        row.hidden = !keep;
        if (keep) visible += 1;
      });
      if (shown) shown.textContent = visible + " of " + rows.length + " shown";
      var hash = Object.keys(state).map(function (k) {
        return encodeURIComponent(k) + "=" + encodeURIComponent(state[k]);
      }).join("&");
      if (("#" + hash) !== location.hash && !(hash === "" && location.hash === "")) {
        history.replaceState(null, "", hash ? "#" + hash : location.pathname);
      }
    }

    var initial = readHash();
    fields.forEach(function (f) {
      if (f.name in initial) {
        if (f.type === "checkbox") f.checked = initial[f.name] === f.value;
        else f.value = initial[f.name];
      }
      f.addEventListener(f.type === "search" ? "input" : "change", apply);
    });
    apply();
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  var form = document.getElementById("filters");
  var table = document.querySelector("table.tasks:not(.lmr)");  // the run's task list, not the LMR table
  if (form && table) setupFilters(form, table);
})();
