// The request form: show only the fields the chosen kind of request uses (all of them
// stay in the page without JavaScript; the server ignores the ones a kind does not use).
(function () {
  "use strict";
  const form = document.querySelector("[data-request-form]");
  if (!form) return;
  function update() {
    const checked = form.querySelector('input[name="kind"]:checked');
    const kind = checked ? checked.value : "";
    form.querySelectorAll("[data-kinds]").forEach(function (group) {
      group.hidden = !group.dataset.kinds.split(" ").includes(kind);
    });
  }
  form.addEventListener("change", update);
  update();
})();
