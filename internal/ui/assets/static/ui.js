// manifold ui: follows a running run. The page's #live element names the
// fragment to fetch (data-src) and how often (data-poll, ms); polling
// stops once the fragment says the run is final. No framework, no CDN.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || live.dataset.final === "true") return;
  var every = parseInt(live.dataset.poll, 10) || 1000;
  function tick() {
    fetch(live.dataset.src, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var tmp = document.createElement("div");
        tmp.innerHTML = html; // the server's own escaped markup
        var next = tmp.querySelector("#live");
        if (!next) throw new Error("no #live in the fragment");
        live.replaceWith(next);
        live = next;
        if (live.dataset.final !== "true") setTimeout(tick, every);
      })
      .catch(function () { setTimeout(tick, every * 3); });
  }
  setTimeout(tick, every);
})();
