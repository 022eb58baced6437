// Issue #22's pictures in a real browser: a picture chosen in the comment
// form uploads at once with its progress shown and lands in the text as
// Markdown, then shows in the posted comment as a lazy image of the size
// the server stored; one pasted into the text does the same; an SVG is
// refused with the server's message and nothing added; with JavaScript
// off the form carries the file itself and the comment comes back with
// the picture; on a phone's screen the picture fits the column. The JPEG
// and PNG files are drawn on a canvas in the page. Run through run.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, ARGS, api, register, open } from './lib.mjs';

const run = Date.now().toString(36).slice(-5);
const COMMUNITY = 'pics' + run;
const SHOTS = process.env.PITH_SCREENSHOTS;

let browser;
let topic;

before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
  await api('POST', '/communities', { name: COMMUNITY, title: 'Pictures', description: 'For the picture tests.' });
  topic = (await api('POST', `/communities/${COMMUNITY}/topics`, { title: `Show your Pi ${run}`, body: 'Photos welcome.' })).id;
});

after(async () => {
  await browser?.close();
});


/** A `type` picture of `w`×`h` drawn on a canvas in `page`, as a file for setInputFiles. */
async function drawn(page, name, type, w, h) {
  const b64 = await page.evaluate(async ([type, w, h]) => {
    const canvas = document.createElement('canvas');
    [canvas.width, canvas.height] = [w, h];
    const g = canvas.getContext('2d');
    const grad = g.createLinearGradient(0, 0, w, h);
    grad.addColorStop(0, '#c2410c');
    grad.addColorStop(1, '#1f4fb6');
    g.fillStyle = grad;
    g.fillRect(0, 0, w, h);
    const url = canvas.toDataURL(type, 0.9);
    return url.slice(url.indexOf(',') + 1);
  }, [type, w, h]);
  return { name, mimeType: type, buffer: Buffer.from(b64, 'base64') };
}

test('a picture chosen in the comment form uploads with progress and shows in the comment; pasting works; an SVG is refused', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx);
  await register(page, 'snapper' + run);
  await page.goto(BASE + `/t/${topic}`);
  const form = page.locator('#reply-top');
  const area = form.locator('textarea');
  await area.fill('My cluster:');
  const progress = [];
  await page.exposeFunction('seenProgress', (v) => progress.push(v));
  await page.evaluate(() => {
    const bar = document.querySelector('#reply-top .picture progress');
    new MutationObserver(() => { if (!bar.hidden) window.seenProgress(bar.value); })
      .observe(bar, { attributes: true });
  });
  await form.getByLabel('Add a picture').setInputFiles(await drawn(page, 'pi-cluster.jpg', 'image/jpeg', 2400, 1600));
  await form.locator('.upload-status').filter({ hasText: 'Added pi-cluster.jpg (2048×1365)' }).waitFor();
  assert.ok(progress.length > 0, 'the progress bar showed');
  const text = await area.inputValue();
  assert.match(text, /^My cluster:\n\n!\[pi cluster\]\(\/media\/[0-9a-f]+-2048x1365\.jpg\)\n$/, text);
  assert.equal(await form.getByLabel('Add a picture').inputValue(), '', 'the file is not sent again with the form');

  // Pasted: the same, at the cursor.
  await area.focus();
  await page.keyboard.press('End');
  const png = await drawn(page, 'shot.png', 'image/png', 300, 200);
  await page.evaluate(([b64]) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], 'screenshot.png', { type: 'image/png' }));
    document.querySelector('#reply-top textarea').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  }, [png.buffer.toString('base64')]);
  await form.locator('.upload-status').filter({ hasText: 'Added screenshot.png (300×200)' }).waitFor();
  assert.match(await area.inputValue(), /!\[screenshot\]\(\/media\/[0-9a-f]+-300x200\.(png|jpg)\)\n$/);

  // An SVG: refused with the server's reason, nothing added.
  const before = await area.inputValue();
  await form.getByLabel('Add a picture').setInputFiles({ name: 'logo.svg', mimeType: 'image/svg+xml', buffer: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>') });
  await form.locator('.upload-status').filter({ hasText: /JPEG, PNG, WebP or GIF|not a picture|unsupported/i }).waitFor();
  assert.equal(await area.inputValue(), before);

  await form.getByRole('button', { name: 'Comment' }).click();
  const img = page.locator('#thread .post .body img').first();
  await img.waitFor();
  assert.match(await img.getAttribute('src'), /^\/media\/[0-9a-f]+-2048x1365\.jpg$/);
  assert.deepEqual([await img.getAttribute('width'), await img.getAttribute('height'), await img.getAttribute('loading')], ['2048', '1365', 'lazy']);
  assert.equal(await img.evaluate((el) => el.closest('a')?.getAttribute('href')), await img.getAttribute('src'), 'linked to the full size');
  await img.scrollIntoViewIfNeeded();
  await page.waitForFunction((el) => el.complete && el.naturalWidth === 2048, await img.elementHandle());
  assert.deepEqual(page.errors, []);

  // On a phone's screen the picture fits the column, its shape kept.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, deviceScaleFactor: 2 });
  const small = await open(phone, `/t/${topic}`);
  const shown = small.locator('#thread .post .body img').first();
  await shown.scrollIntoViewIfNeeded();
  await small.waitForFunction((el) => el.complete && el.naturalWidth > 0, await shown.elementHandle());
  const box = await shown.boundingBox();
  assert.ok(box.width > 200 && box.width <= 390, `fits the phone: ${box.width}px wide`);
  assert.ok(Math.abs(box.height / box.width - 1365 / 2048) < 0.02, `shape kept: ${box.width}×${box.height}`);
  assert.equal(await small.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'no sideways scroll');
  if (SHOTS) await small.screenshot({ path: join(SHOTS, 'picture-phone.png') });
  assert.deepEqual(small.errors, []);
  await phone.close();
  await ctx.close();
});

test('with JavaScript off the comment form carries the picture and the comment comes back with it', async () => {
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  const page = await open(ctx);
  const helper = await open(await browser.newContext());
  await register(page, 'nojs' + run);
  await page.goto(BASE + `/t/${topic}`);
  const form = page.locator('#reply-top');
  await form.locator('textarea').fill('Without JavaScript');
  await form.getByLabel('Add a picture').setInputFiles(await drawn(helper, 'board.png', 'image/png', 640, 480));
  await Promise.all([page.waitForURL(new RegExp(`/t/${topic}#p\\d+$`)), form.getByRole('button', { name: 'Comment' }).click()]);
  const post = page.locator('#thread .post').filter({ hasText: 'Without JavaScript' });
  const img = post.locator('.body img');
  assert.match(await img.getAttribute('src'), /^\/media\/[0-9a-f]+-640x480\.(png|jpg)$/);
  assert.equal(await img.getAttribute('alt'), 'board');
  await helper.close();
  await ctx.close();
});
