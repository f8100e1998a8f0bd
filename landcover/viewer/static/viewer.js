// landcover view: the page's script. Everything it loads comes from the server that served
// it (landcover/viewer/server.py): the job's description, map tiles rendered on demand, a
// clicked pixel's class and probabilities. window.landcoverView exposes the map and timings
// (the tests read them).
(function () {
  "use strict";
  const state = { map: null, layers: {}, ready: false, interactiveMs: null, tilesMs: null, job: null };
  window.landcoverView = state;

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function swatch(colour) {
    const node = el("span", { class: "swatch" });
    node.style.backgroundColor = colour;
    return node;
  }

  function legend(classes) {
    const list = document.getElementById("legend");
    for (const c of classes) {
      const item = el("li", { "data-value": c.value, "data-colour": c.colour });
      item.append(swatch(c.colour), el("span", { class: "name" }, c.name));
      list.append(item);
    }
  }

  // The hectares of each class at a glance: over the whole tiles, their share, and inside the
  // area of interest when the job has one (classes.csv's aoi_hectares), with the totals.
  function hectares(table, classes) {
    const node = document.getElementById("hectares");
    const at = (name) => (table ? table.columns.indexOf(name) : -1);
    const [name, ha, fraction, inside] = ["class", "hectares", "fraction", "aoi_hectares"].map(at);
    if (name < 0 || ha < 0 || fraction < 0) {
      const why = table ? "classes.csv has no class, hectares and fraction columns"
        : "no classes.csv in the folder";
      node.replaceWith(el("p", { class: "hint", id: "hectares" }, why));
      return;
    }
    const head = el("tr");
    for (const title of ["class", "ha", "%"].concat(inside < 0 ? [] : ["in area, ha"])) {
      head.append(el("th", {}, title));
    }
    node.append(head);
    const totals = [0, 0, 0];
    const number = (value, i) => el("td", {}, value.toFixed(i === 1 ? 1 : 2));  // % to 0.1
    for (const row of table.rows) {
      const line = el("tr");
      const colour = (classes.find((c) => c.name === row[name]) || {}).colour || "#808080";
      const cell = el("td");
      cell.append(swatch(colour), el("span", {}, row[name]));
      const values = [Number(row[ha]), 100 * Number(row[fraction])];
      if (inside >= 0) values.push(Number(row[inside]));
      line.append(cell);
      values.forEach((value, i) => {
        line.append(number(value, i));
        totals[i] += value;
      });
      node.append(line);
    }
    const total = el("tr", { class: "total" });
    total.append(el("td", {}, "all"));
    totals.slice(0, inside < 0 ? 2 : 3).forEach((value, i) => total.append(number(value, i)));
    node.append(total);
  }

  function areas(table) {
    const node = document.getElementById("areas");
    if (!table) {
      node.parentElement.remove();  // the hectares say the file is missing
      return;
    }
    const head = el("tr");
    for (const column of table.columns) head.append(el("th", {}, column));
    node.append(head);
    for (const row of table.rows) {
      const line = el("tr");
      row.forEach((value) => line.append(el("td", {}, value)));
      node.append(line);
    }
  }

  function showFailure(reason) {
    const box = document.getElementById("pixel");
    box.replaceChildren(el("p", { class: "error" }, `cannot read this pixel: ${reason}`));
    box.removeAttribute("data-value");
  }

  function showPixel(report, classes) {
    const box = document.getElementById("pixel");
    box.replaceChildren();
    if (report === null) {
      box.removeAttribute("data-value");
      box.append(el("p", { class: "hint" }, "no class here"));
      return;
    }
    box.setAttribute("data-value", report.value);
    const colour = (classes.find((c) => c.value === report.value) || {}).colour || "#808080";
    const title = el("p", { class: "class" });
    title.append(swatch(colour), el("strong", { class: "name" }, report.name));
    box.append(title, el("p", { class: "where hint" },
      `${report.tile}, row ${report.row}, column ${report.col}`));
    if (!report.probabilities.length) {
      box.append(el("p", { class: "hint" }, "no probability map (--no-probs)"));
      return;
    }
    const table = el("table", { class: "probabilities" });
    for (const p of report.probabilities) {
      const row = el("tr", { "data-value": p.value, "data-probability": p.probability });
      const bar = el("span", { class: "bar" });
      bar.style.width = `${Math.round(60 * p.probability)}px`;
      const barCell = el("td");
      barCell.append(bar);
      row.append(el("td", {}, p.name), el("td", { class: "percent" },
        `${(100 * p.probability).toFixed(1)} %`), barCell);
      table.append(row);
    }
    box.append(table);
  }

  async function start() {
    const job = await (await fetch("/api/job")).json();
    state.job = job;
    document.getElementById("title").textContent = job.name;
    document.getElementById("subtitle").textContent =
      `${job.tiles} tile${job.tiles === 1 ? "" : "s"}` + (job.aoi ? ", area of interest in magenta" : "");
    legend(job.classes);
    hectares(job.table, job.classes);
    areas(job.table);

    const map = L.map("map", { maxZoom: 22, attributionControl: false, fadeAnimation: false });
    state.map = map;
    const [west, south, east, north] = job.bounds;
    map.fitBounds([[south, west], [north, east]]);
    // the imagery under the class map, both under the outline (Leaflet's overlays, 400)
    map.createPane("imagery").style.zIndex = 250;
    map.createPane("classes").style.zIndex = 300;
    const imagery = {};
    for (const name of ["truecolor", "falsecolor"]) {
      imagery[name] = L.tileLayer(`/tiles/${name}/{z}/{x}/{y}.png`, { pane: "imagery", maxZoom: 22 });
    }
    const opacity = document.getElementById("opacity");
    const classes = L.tileLayer("/tiles/classes/{z}/{x}/{y}.png",
      { pane: "classes", maxZoom: 22, opacity: Number(opacity.value) });
    classes.once("load", () => { state.tilesMs = performance.now(); });
    classes.addTo(map);
    state.layers = { classes, ...imagery };

    const select = document.getElementById("imagery");
    if (!job.imagery) {
      select.disabled = true;
      select.title = "the job's input images cannot be read from here";
    } else {
      select.value = "truecolor";  // the map over the imagery, as one looks at a map
      imagery.truecolor.addTo(map);
    }
    select.addEventListener("change", () => {
      for (const [name, layer] of Object.entries(imagery)) {
        if (name === select.value) layer.addTo(map);
        else map.removeLayer(layer);
      }
    });
    opacity.addEventListener("input", () => {
      classes.setOpacity(Number(opacity.value));
      document.getElementById("opacity-value").textContent = opacity.value;
    });
    if (job.aoi) {
      const aoi = await (await fetch("/api/aoi")).json();
      L.geoJSON(aoi, { style: { color: "#ff00ff", weight: 2, fill: false } }).addTo(map);
    }
    map.on("click", async (event) => {
      const { lat, lng } = event.latlng;
      const reply = await fetch(`/api/pixel?lon=${lng}&lat=${lat}`);
      const answer = await reply.json();
      if (reply.ok) showPixel(answer, job.classes);
      else showFailure(answer.error || `error ${reply.status}`);
      state.clicks = (state.clicks || 0) + 1;
    });
    state.interactiveMs = performance.now();
    state.ready = true;
  }

  start().catch((error) => {
    document.getElementById("subtitle").textContent = `error: ${error}`;
    state.error = String(error);
  });
})();
