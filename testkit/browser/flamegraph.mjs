// Opens a flame graph SVG in Debian's headless chromium (driven by playwright-core) as a person
// would, and prints what it saw as one JSON object for the Rust test to judge:
//
//   node flamegraph.mjs SVG SCREENSHOT_DIR CLICK SEARCH
//
// - title, subtitle: their text, and the width each takes once drawn (titleWidth, subtitleWidth)
//   beside the picture's (width): a line wider than the picture is cut off at both ends;
// - frames: every frame drawn, its tooltip and width in pixels (it renders);
// - zoom: after a click on the frame whose tooltip starts with CLICK, that frame's width and
//   the graph's, whether "Reset Zoom" shows, and how many frames were hidden;
// - search: after "Search" and SEARCH typed into the prompt, the "Matched" text and which
//   frames took the search color;
// - screenshots: SCREENSHOT_DIR/flamegraph.png before any click, flamegraph-zoom.png and
//   flamegraph-search.png after.
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { launch } from "./chromium.mjs";

const [svg, shots, click, term] = process.argv.slice(2);
if (!term) {
  console.error("usage: node flamegraph.mjs SVG SCREENSHOT_DIR CLICK SEARCH");
  process.exit(2);
}
const browser = await launch();

// The frames drawn: tooltip, width and position in pixels, visibility and fill.
async function frames(page) {
  return page.$$eval("#frames > g", (groups) =>
    groups.map((g) => {
      const rect = g.querySelector("rect");
      const box = rect.getBoundingClientRect();
      return {
        title: g.querySelector("title").textContent,
        width: box.width,
        x: box.x,
        y: box.y,
        hidden: g.classList.contains("hide"),
        fill: rect.getAttribute("fill"),
      };
    }),
  );
}

const result = {};
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  await page.goto(pathToFileURL(svg).href);
  // inferno lays the frames out after the page loads
  await page.waitForFunction(() => document.getElementById("frames")?.children.length > 0);
  await page.waitForTimeout(200);
  result.title = await page.$eval("#title", (t) => t.textContent);
  result.subtitle = await page.$eval("#subtitle", (t) => t.textContent);
  result.titleWidth = await page.$eval("#title", (t) => t.getComputedTextLength());
  result.subtitleWidth = await page.$eval("#subtitle", (t) => t.getComputedTextLength());
  result.width = await page.evaluate(() => document.documentElement.width.baseVal.value);
  result.graphWidth = await page.$eval("#frames", (f) => f.getBoundingClientRect().width);
  result.frames = await frames(page);
  await page.locator("svg").first().screenshot({ path: join(shots, "flamegraph.png") });

  // A click on the frame zooms into it: it spans the graph, the frames beside it hide.
  const before = result.frames.find((f) => f.title.startsWith(click + " ("));
  if (!before) throw new Error(`no frame ${click}`);
  await page.mouse.click(before.x + before.width / 2, before.y + 5);
  await page.waitForTimeout(300);
  const zoomed = await frames(page);
  result.zoom = {
    before: before.width,
    after: zoomed.find((f) => f.title === before.title && !f.hidden).width,
    resetShown: await page.$eval("#unzoom", (b) => !b.classList.contains("hide")),
    hidden: zoomed.filter((f) => f.hidden).length,
  };
  await page.locator("svg").first().screenshot({ path: join(shots, "flamegraph-zoom.png") });
  await page.click("#unzoom");
  await page.waitForTimeout(200);

  // "Search" asks for a term in a prompt; the frames that match take the search color.
  page.once("dialog", (dialog) => dialog.accept(term));
  await page.click("#search");
  await page.waitForTimeout(300);
  const searched = await frames(page);
  result.search = {
    matched: await page.$eval("#matched", (m) => m.textContent),
    highlighted: searched.filter((f) => f.fill !== result.frames.find((o) => o.title === f.title)?.fill).map((f) => f.title),
    searchColor: searched.find((f) => f.title.includes(term))?.fill,
  };
  await page.locator("svg").first().screenshot({ path: join(shots, "flamegraph-search.png") });
  result.errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
