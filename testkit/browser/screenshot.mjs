// Takes a screenshot of a local page in Debian's headless chromium:
//
//   node screenshot.mjs PAGE PNG WIDTH HEIGHT
import { pathToFileURL } from "node:url";
import { launch } from "./chromium.mjs";

const [page, png, width, height] = process.argv.slice(2);
if (!height) {
  console.error("usage: node screenshot.mjs PAGE PNG WIDTH HEIGHT");
  process.exit(2);
}
const browser = await launch();
try {
  const tab = await browser.newPage({ viewport: { width: Number(width), height: Number(height) } });
  await tab.goto(pathToFileURL(page).href);
  await tab.screenshot({ path: png });
} finally {
  await browser.close();
}
