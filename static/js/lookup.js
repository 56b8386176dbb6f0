// Turns every text input with data-lookup="<url>" into a search-as-you-type field: as the
// user types, it asks the lookup endpoint (/api/v1/lookup/<kind>/?q=) for a few matches and
// offers them in a <datalist>. Without JavaScript the input stays a plain text field that
// takes a username or a slug, so nothing depends on this file.
(function () {
  "use strict";
  if (!window.fetch) return;
  var DELAY_MS = 200;
  var LIMIT = 10;

  function attach(input, index) {
    var list = document.createElement("datalist");
    list.id = (input.id || "lookup-" + index) + "-suggestions";
    input.insertAdjacentElement("afterend", list);
    input.setAttribute("list", list.id);
    var timer = null;
    var controller = null;
    var lastQuery = null;

    function show(items) {
      list.replaceChildren();
      items.forEach(function (item) {
        var option = document.createElement("option");
        option.value = item.value;
        if (item.label && item.label !== item.value) option.label = item.label;
        list.appendChild(option);
      });
    }

    function ask() {
      var query = input.value.trim();
      if (query === lastQuery) return;
      lastQuery = query;
      if (!query) {
        show([]);
        return;
      }
      if (controller && window.AbortController) controller.abort();
      controller = window.AbortController ? new AbortController() : null;
      var url = input.dataset.lookup + "?limit=" + LIMIT + "&q=" + encodeURIComponent(query);
      fetch(url, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        signal: controller ? controller.signal : undefined,
      })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (page) { if (page && page.results) show(page.results); })
        .catch(function () {});
    }

    input.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(ask, DELAY_MS);
    });
  }

  function start() {
    document.querySelectorAll("input[data-lookup]").forEach(attach);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
