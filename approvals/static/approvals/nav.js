// Fill the navigation's counts (unread notifications, requests waiting for me) after the page
// has loaded, so that no page pays for them while it renders.
(function () {
  "use strict";
  const nav = document.querySelector("[data-counts-url]");
  if (!nav || !window.fetch) return;
  fetch(nav.dataset.countsUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then(function (response) { return response.ok ? response.json() : null; })
    .then(function (counts) {
      if (!counts) return;
      nav.querySelectorAll("[data-count]").forEach(function (badge) {
        const value = counts[badge.dataset.count] || 0;
        badge.textContent = value;
        badge.style.display = value ? "" : "none";
      });
    })
    .catch(function () {});
})();
