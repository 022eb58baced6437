// Issue #21's account lifecycle in a real browser: the export downloaded
// and the account deleted from the settings page, and two-factor login
// set up there (the QR code shown) and asked for at login. TOTP codes are
// computed here with Node's HMAC-SHA1, as an authenticator app would.
// Run through run.sh, like forum.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { chromium } from 'playwright-core';
import { BASE, ADMIN, ARGS, PASSWORD, api, register, open } from './lib.mjs';

assert.ok(BASE && ADMIN, 'run through tests/browser/run.sh');

const run = Date.now().toString(36).slice(-5);
const COMMUNITY = 'acct' + run;

let browser;
let topic;


/// RFC 6238: six digits of HMAC-SHA1 over the 30-second step of `at`.
function totp(base32, at) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const c of base32.replace(/=+$/, '')) bits += alphabet.indexOf(c).toString(2).padStart(5, '0');
  const bytes = [];
  for (let i = 0; i + 8 <= bits.length; i += 8) bytes.push(parseInt(bits.slice(i, i + 8), 2));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30)));
  const h = createHmac('sha1', Buffer.from(bytes)).update(counter).digest();
  const o = h[h.length - 1] & 0xf;
  const n = (((h[o] & 0x7f) << 24) | (h[o + 1] << 16) | (h[o + 2] << 8) | h[o + 3]) % 1_000_000;
  return String(n).padStart(6, '0');
}



async function logout(page) {
  await Promise.all([page.waitForURL(BASE + '/'), page.getByRole('button', { name: 'Log out' }).click()]);
}

async function login(page, name, code) {
  await page.goto(BASE + '/login');
  await page.getByLabel('Username').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  if (code) await page.getByLabel(/Two-factor code/).fill(code);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForLoadState();
}

before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
  await api('POST', '/communities', { name: COMMUNITY, title: 'Accounts', description: 'Account lifecycle tests.' });
  topic = (await api('POST', `/communities/${COMMUNITY}/topics`, { title: `Say goodbye ${run}`, body: 'Here.' })).id;
});

after(async () => {
  await browser?.close();
});

test('export and delete: the settings page downloads the data and deletes the account', async () => {
  const ctx = await browser.newContext({ acceptDownloads: true });
  // The deletion button asks to confirm: yes.
  const page = await open(ctx, undefined, { acceptDialogs: true });
  const name = 'leaver' + run;
  await register(page, name);
  const words = `Leaving soon ${run}`;
  const reply = await api('POST', `/topics/${topic}/posts`, { body: 'A reply to keep the thread.' });
  await page.goto(BASE + `/t/${topic}`);
  await page.getByLabel('Add a comment').fill(words);
  await page.getByRole('button', { name: 'Comment', exact: true }).click();
  await page.getByText(words).waitFor();

  await page.goto(BASE + '/settings');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Download everything you made and set' }).click(),
  ]);
  assert.equal(download.suggestedFilename(), `pith-export-${name}.json`);
  const doc = JSON.parse(await readFile(await download.path(), 'utf8'));
  assert.equal(doc.profile.name, name);
  assert.deepEqual(doc.posts.map((p) => p.body), [words]);

  await page.getByLabel('Remove their text').check();
  await page.locator('#delete-password').fill('wrong-password');
  await page.getByRole('button', { name: 'Delete my account' }).click();
  await page.locator('#delete [role=alert]').getByText('current password is wrong').waitFor();
  await page.getByLabel('Remove their text').check();
  await page.locator('#delete-password').fill(PASSWORD);
  await Promise.all([page.waitForURL(BASE + '/'), page.getByRole('button', { name: 'Delete my account' }).click()]);
  await page.getByRole('link', { name: 'Log in' }).waitFor();

  await page.goto(BASE + `/t/${topic}`);
  assert.equal(await page.getByText(words).count(), 0, 'its text is removed');
  assert.ok(await page.locator(`#p${reply.id}`).isVisible(), 'the rest of the thread stays');
  await login(page, name);
  await page.getByRole('alert').getByText(/wrong username or password/i).waitFor();
  assert.deepEqual(page.errors, []);
  await ctx.close();
});

test('2FA login: set up with the QR code on the settings page, then asked for at login', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx, undefined, { acceptDialogs: true });
  const name = 'careful' + run;
  await register(page, name);
  await page.goto(BASE + '/settings');
  await page.getByRole('button', { name: 'Set up two-factor login' }).click();
  const qr = page.getByAltText('QR code of the two-factor key');
  await qr.waitFor();
  assert.ok(await qr.evaluate((img) => img.complete && img.naturalWidth > 0), 'the QR code (a data: URL) is drawn');
  const secret = (await page.locator('#tf-secret').textContent()).trim();
  await page.getByLabel('Code from your app').fill(totp(secret, Date.now() / 1000));
  await page.getByRole('button', { name: 'Turn two-factor login on' }).click();
  await page.getByText('Two-factor login is on.').waitFor();
  const codes = await page.locator('.recovery-codes code').allTextContents();
  assert.equal(codes.length, 10);

  await logout(page);
  await login(page, name);
  await page.getByRole('alert').getByText('Enter the code from your authenticator app').waitFor();
  await login(page, name, '000000x');
  await page.getByRole('alert').getByText(/wrong, expired or used/).waitFor();
  // The next step's code: the one that confirmed the app is used up.
  await login(page, name, totp(secret, Date.now() / 1000 + 30));
  await page.getByRole('link', { name }).waitFor();
  await logout(page);
  await login(page, name, codes[0]);
  await page.getByRole('link', { name }).waitFor();
  assert.deepEqual(page.errors, []);
  await ctx.close();
});
