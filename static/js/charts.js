// Draws every plotly figure on the page: from its JSON embedded with json_script
// (data-plotly-figure), or fetched from its URL once it scrolls into view, with plotly.js
// loaded then too (data-plotly-url, data-plotly-src: the home page's chart).
(function () {
  "use strict";
  var options = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["lasso2d", "select2d"],
  };
  function plot(element, figure) {
    element.classList.add("chart--drawn");
    window.Plotly.newPlot(element, figure.data, figure.layout, options);
  }
  var loading = null;
  function plotly(src) {
    if (window.Plotly) {
      return Promise.resolve();
    }
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = src;
        script.onload = resolve;
        script.onerror = reject;
        document.head.appendChild(script);
      });
    }
    return loading;
  }
  function fetched(element) {
    var figure = fetch(element.dataset.plotlyUrl, { credentials: "same-origin" }).then(
      function (response) {
        return response.json();
      }
    );
    Promise.all([figure, plotly(element.dataset.plotlySrc)]).then(function (done) {
      plot(element, done[0]);
    });
  }
  function draw() {
    document.querySelectorAll("[data-plotly-url]").forEach(function (element) {
      if (!("IntersectionObserver" in window)) {
        fetched(element);
        return;
      }
      var observer = new IntersectionObserver(function (entries) {
        if (entries.some(function (entry) { return entry.isIntersecting; })) {
          observer.disconnect();
          fetched(element);
        }
      });
      observer.observe(element);
    });
    if (!window.Plotly) {
      return;
    }
    document.querySelectorAll("[data-plotly-figure]").forEach(function (element) {
      var source = document.getElementById(element.dataset.plotlyFigure);
      if (source) {
        plot(element, JSON.parse(source.textContent));
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
