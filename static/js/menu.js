// On a phone the header's menu folds away behind its "Menu" button (arbiter.css). Loaded in
// the head, so the page never shows the menu open first; without this script the menu stays
// open (the CSS folds it only under the "js" class).
document.documentElement.classList.add("js");
document.addEventListener("DOMContentLoaded", function () {
  var header = document.getElementById("site-menu");
  var toggle = header && header.querySelector(".menu-toggle");
  if (!toggle) {
    return;
  }
  toggle.addEventListener("click", function () {
    var open = header.classList.toggle("site-header--open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });
});
