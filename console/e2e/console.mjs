// Drives the operator console in Debian's chromium with playwright-core,
// as an operator would: a wrong key refused, the right key imported, a
// held payment judged with its context and approved, its record entries
// verified in the page, another declined, the page at 360 px wide and by
// keyboard. Run by cmd/countersign's TestConsoleInBrowser, which starts
// the server, makes the held payments and checks the outcome through the
// API; configuration comes from the environment (see that test).
import { chromium } from "playwright-core";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const url = env("CONSOLE_URL"), shots = env("SHOTS");
const approveID = env("APPROVE_ID"), declineID = env("DECLINE_ID");
mkdirSync(shots, { recursive: true });

function check(cond, what) {
  if (!cond) throw new Error("console test: " + what);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // No sandbox as root in CI; no background networking, which this
  // machine's closed network refuses.
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
let failed = false;
let page;
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await ctx.newPage();
  const external = [];
  page.on("request", (r) => {
    if (!r.url().startsWith(new URL(url).origin)) external.push(r.url());
  });
  const cspErrors = [];
  page.on("console", (m) => {
    if (m.type() === "error") cspErrors.push(m.text());
  });
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]");

  // 1. The page's signer against the Go signer's vectors.
  const vectors = JSON.parse(readFileSync(env("VECTORS"), "utf8"));
  const headers = await page.evaluate(async (vs) => {
    const m = await import("./sign.js");
    const out = [];
    for (const v of vs) {
      const op = await m.importOperatorKey(JSON.stringify(v.jwk));
      const body = new TextEncoder().encode(v.body);
      out.push(await m.sign(op, { operationId: v.operationId, method: v.method, baseURL: v.baseURL, pathAndQuery: v.pathAndQuery, body, ts: v.ts, nonce: v.nonce }));
    }
    return out;
  }, vectors);
  writeFileSync(env("VECTORS_OUT"), JSON.stringify(headers));

  // 2. A wrong key: the page signs, the server refuses, the page shows
  // the problem.
  await page.setInputFiles("#key-file", env("WRONG_KEY"));
  await page.waitForSelector("#queue-list .problem");
  const refused = await page.textContent("#queue-list .problem");
  check(refused.includes("operator.unauthorized"), "the wrong key's refusal shows its code: " + refused);
  await page.screenshot({ path: join(shots, "wrong-key.png"), fullPage: true });
  await page.click("#key-forget");

  // 3. The right key, pasted.
  await page.fill("#key-text", readFileSync(env("OPERATOR_KEY"), "utf8"));
  await page.click("#key-import");
  const card = `article[data-intent="${approveID}"]`;
  await page.waitForSelector(card);
  await page.waitForSelector(`article[data-intent="${declineID}"]`);
  const text = await page.textContent(card);
  for (const want of ["Approvals: 0 of 1", "Payee", "Agent's spending", "Mandate budget", "left"]) {
    check(text.includes(want), `the held payment shows "${want}": ${text}`);
  }
  check(!(await page.isChecked(`${card} input[type=checkbox]`)), "the acknowledgement is not pre-ticked");
  await page.screenshot({ path: join(shots, "queue.png"), fullPage: true });

  // 4. Approve: rationale, acknowledgement, confirmation that restates it.
  await page.fill(`${card} textarea`, "customer confirmed the order by phone");
  await page.check(`${card} input[type=checkbox]`);
  await page.click(`${card} button:has-text("Approve")`);
  await page.waitForSelector("#confirm[open]");
  const restated = await page.textContent("#confirm");
  check(restated.includes(approveID) && restated.includes("customer confirmed"), "the confirmation restates the action: " + restated);
  await page.click("#confirm-ok");
  await page.waitForSelector(`${card} .ok`);
  const approved = await page.textContent(`${card} .ok`);
  check(approved.includes("settled"), "the approval answers settled: " + approved);

  // 5. Its entries in the record, each verified in the page.
  await page.click(`${card} a:has-text("record")`);
  await page.waitForSelector("#record-list td.verify");
  await page.waitForFunction(() => [...document.querySelectorAll("#record-list td.verify")].every((c) => !c.textContent.startsWith("checking")));
  const rows = await page.$$eval("#record-list tbody tr", (trs) => trs.map((tr) => [tr.children[2].textContent, tr.children[6].textContent]));
  check(rows.length >= 3, "the intent has its entries: " + JSON.stringify(rows));
  check(rows.every(([, v]) => v.startsWith("verified")), "every entry verified: " + JSON.stringify(rows));
  check(rows.some(([t]) => t === "payment.settled"), "the settlement is in the record: " + JSON.stringify(rows));
  await page.screenshot({ path: join(shots, "record.png"), fullPage: true });

  // The whole record too, every entry verified.
  await page.click("#record-all");
  await page.waitForFunction(() => {
    const cells = [...document.querySelectorAll("#record-list td.verify")];
    return cells.length > 0 && cells.every((c) => !c.textContent.startsWith("checking"));
  });
  const bad = await page.$$eval("#record-list td.verify.bad", (c) => c.map((x) => x.textContent));
  check(bad.length === 0, "every entry of the record verified: " + bad.join("; "));

  // 6. Decline the other, by keyboard: focus, type, Enter.
  await page.goto(url + "#queue"); // only the fragment changes: reload
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  // A reload forgets the key, as it must.
  check(await page.isVisible("#key-none"), "the key is forgotten on reload");
  await page.fill("#key-text", readFileSync(env("OPERATOR_KEY"), "utf8"));
  await page.click("#key-import");
  const dcard = `article[data-intent="${declineID}"]`;
  await page.waitForSelector(dcard);
  check(!(await page.$(`article[data-intent="${approveID}"]`)), "the approved payment left the queue");
  await page.focus(`${dcard} textarea`);
  await page.keyboard.type("payee is not on our vendor list");
  await page.keyboard.press("Tab"); // the acknowledgement
  await page.keyboard.press("Tab"); // Approve…
  await page.keyboard.press("Tab"); // Decline…
  await page.keyboard.press("Enter");
  await page.waitForSelector("#confirm[open]");
  check((await page.textContent("#confirm")).includes("will not be paid"), "the decline's confirmation says what happens");
  await page.click("#confirm-ok");
  await page.waitForSelector(`${dcard} .ok`);
  check((await page.textContent(`${dcard} .ok`)).includes("declined"), "the decline answers declined");

  // 7. Refund part of the approved payment, then the rest.
  await page.goto(url + "#refund");
  await page.fill("#refund-intent", approveID);
  await page.fill("#refund-amount", "5000");
  await page.fill("#refund-rationale", "one item returned by the customer");
  await page.click("#refund-form button[type=submit]");
  await page.waitForSelector("#confirm[open]");
  check((await page.textContent("#confirm")).includes("5000 minor units"), "the refund's confirmation restates the amount");
  await page.click("#confirm-ok");
  await page.waitForSelector("#refund-result .ok");
  check((await page.textContent("#refund-result")).includes("20000 remain"), "a partial refund: " + (await page.textContent("#refund-result")));
  await page.fill("#refund-amount", "");
  await page.click("#refund-form button[type=submit]");
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector("#refund-result").textContent.includes("0 remain"));

  // 8. Kill switch: engage, then release; breaker reset. A cancelled
  // confirmation sends nothing.
  await page.goto(url + "#controls");
  await page.check("input[name=action][value=engage]");
  await page.fill("#controls-rationale", "incident drill in the console");
  await page.click("#controls-form button[type=submit]");
  await page.click("#confirm-cancel");
  check((await page.textContent("#controls-result")) === "", "a cancelled confirmation does nothing");
  await page.click("#controls-form button[type=submit]");
  check((await page.textContent("#confirm")).includes("No payment will settle"), "the kill switch's confirmation says what happens");
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector("#controls-result").textContent.includes("Kill switch engaged"));
  await page.check("input[name=action][value=release]");
  await page.click("#controls-form button[type=submit]");
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector("#controls-result").textContent.includes("Kill switch released"));
  await page.check("input[name=action][value=reset]");
  await page.click("#controls-form button[type=submit]");
  await page.click("#confirm-ok");
  // The breaker is closed: the server refuses, and the page says why.
  await page.waitForSelector("#controls-result .problem");
  check((await page.textContent("#controls-result")).includes("breaker.not_tripped"), "a reset of a closed breaker shows the problem");

  // 9. Webhooks: create (the secret shown once), list, deactivate.
  await page.goto(url + "#webhooks");
  await page.fill("#webhooks-url", "http://127.0.0.1:9/hooks");
  await page.fill("#webhooks-rationale", "finance wants settlement events");
  await page.click("#webhooks-form button[type=submit]");
  await page.click("#confirm-ok");
  await page.waitForSelector("#webhooks-result pre.secret");
  check((await page.textContent("#webhooks-result pre.secret")).startsWith("whsec_"), "the secret is shown: " + (await page.textContent("#webhooks-result")));
  await page.waitForSelector("#webhooks-list td");
  await page.click('#webhooks-list button:has-text("Deactivate")');
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector("#webhooks-result").textContent.startsWith("Deactivated"));
  await page.waitForFunction(() => [...document.querySelectorAll("#webhooks-list td")].some((td) => td.textContent === "no"));
  await page.screenshot({ path: join(shots, "webhooks.png"), fullPage: true });

  // 10. 360 px wide: nothing wider than the screen.
  await page.setViewportSize({ width: 360, height: 740 });
  await page.goto(url + "#queue");
  await page.click("#queue-refresh");
  await page.waitForSelector("#queue-list p, #queue-list article");
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  check(overflow <= 360, "the page fits 360 px: scrollWidth " + overflow);
  await page.screenshot({ path: join(shots, "queue-360.png"), fullPage: true });
  await page.goto(url + "#record");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  await page.fill("#key-text", readFileSync(env("OPERATOR_KEY"), "utf8"));
  await page.click("#key-import");
  await page.click("#record-all");
  await page.waitForSelector("#record-list td.verify.ok");
  const overflow2 = await page.evaluate(() => document.documentElement.scrollWidth);
  check(overflow2 <= 360, "the record fits 360 px: scrollWidth " + overflow2);
  await page.screenshot({ path: join(shots, "record-360.png"), fullPage: true });

  check(external.length === 0, "the page loaded nothing from another origin: " + external.join(", "));
  check(!cspErrors.some((e) => e.includes("Content Security Policy")), "no CSP violation: " + cspErrors.join("; "));
} catch (e) {
  failed = true;
  console.error(e.stack || String(e));
  if (page) {
    // What the operator would have seen.
    await page.screenshot({ path: join(shots, "failure.png"), fullPage: true }).catch(() => {});
    console.error("page text:\n" + (await page.textContent("main").catch(() => "")));
  }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
