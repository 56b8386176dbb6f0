// Draws every plotly figure on the page from its JSON (embedded with json_script).
(function () {
  "use strict";
  function draw() {
    if (!window.Plotly) {
      return;
    }
    document.querySelectorAll("[data-plotly-figure]").forEach(function (element) {
      var source = document.getElementById(element.dataset.plotlyFigure);
      if (!source) {
        return;
      }
      var figure = JSON.parse(source.textContent);
      element.classList.add("chart--drawn");
      window.Plotly.newPlot(element, figure.data, figure.layout, {
        responsive: true,
        displaylogo: false,
        modeBarButtonsToRemove: ["lasso2d", "select2d"],
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
