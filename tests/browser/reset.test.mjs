// Issue #21 in a real browser: a password reset by mail. A reader who
// gave an address at registration (confirmed through its mailed link)
// asks for a reset on the login page, opens the link from the mail the
// SMTP sink received, sets a new password and logs in with it. Run through
// run.sh, which starts the sink (tests/lib/smtp_sink.py) and points
// `pith serve --smtp-url` at it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, ARGS } from './lib.mjs';

const MAIL_DIR = process.env.PITH_MAIL_DIR;
assert.ok(BASE && MAIL_DIR, 'run through tests/browser/run.sh');

const run = Date.now().toString(36).slice(-5);
const NAME = 'forgetful' + run;
const EMAIL = `${NAME}@example.org`;

let browser;

before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
});

after(async () => {
  await browser?.close();
});

/** The first mail to `to` with `subject` the sink received, waiting up to a minute. */
async function mail(to, subject) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    for (const name of (await readdir(MAIL_DIR)).filter((n) => n.endsWith('.json')).sort()) {
      const m = JSON.parse(await readFile(join(MAIL_DIR, name), 'utf8'));
      if (m.to.includes(to) && m.subject === subject) return m;
    }
    assert.ok(Date.now() < deadline, `no mail "${subject}" to ${to} arrived`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function link(m, path) {
  const url = m.body.split(/\s+/).find((w) => w.startsWith('http') && w.includes(path));
  assert.ok(url, `no ${path} link in:\n${m.body}`);
  return url;
}

test('a forgotten password is reset by mail, and only the new one logs in', async () => {
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  const page = await ctx.newPage();
  await page.goto(BASE + '/register');
  await page.getByLabel('Username').fill(NAME);
  await page.getByLabel('Password').fill('old-password-1');
  await page.getByLabel('Email').fill(EMAIL);
  await Promise.all([page.waitForURL(BASE + '/'), page.getByRole('button', { name: 'Sign up' }).click()]);
  // The confirmation link from the first mail.
  await page.goto(link(await mail(EMAIL, 'Confirm your email address'), '/verify/'));
  await page.getByRole('heading', { name: 'Address confirmed' }).waitFor();
  await page.goto(BASE + '/settings/email');
  assert.match(await page.locator('#address').innerText(), new RegExp(`Confirmed: ${EMAIL}`));
  await ctx.close();

  // Signed out, the password forgotten.
  const anon = await browser.newContext({ javaScriptEnabled: false });
  const reader = await anon.newPage();
  await reader.goto(BASE + '/login');
  await Promise.all([reader.waitForURL(BASE + '/reset'), reader.getByRole('link', { name: 'Forgot password?' }).click()]);
  await reader.getByLabel('email address').fill(EMAIL.toUpperCase());
  await reader.getByRole('button', { name: 'Mail me a link' }).click();
  await reader.getByText('If an account has this address').waitFor();
  await reader.screenshot({ path: join(process.env.PITH_SCREENSHOTS, 'reset-asked.png') });

  const resetLink = link(await mail(EMAIL, 'Reset your password'), '/reset/');
  assert.ok(resetLink.startsWith(BASE + '/reset/'), resetLink);
  await reader.goto(resetLink);
  await reader.getByLabel('New password').fill('new-password-2');
  await reader.getByRole('button', { name: 'Set password' }).click();
  await reader.getByRole('heading', { name: 'Password changed' }).waitFor();

  // The link works once.
  await reader.goto(resetLink);
  await reader.getByLabel('New password').fill('new-password-3');
  await reader.getByRole('button', { name: 'Set password' }).click();
  await reader.getByText('unknown, used or expired').waitFor();

  await reader.goto(BASE + '/login');
  await reader.getByLabel('Username').fill(NAME);
  await reader.getByLabel('Password').fill('old-password-1');
  await reader.getByRole('button', { name: 'Log in' }).click();
  await reader.getByText('wrong username or password', { exact: false }).waitFor();
  await reader.getByLabel('Password').fill('new-password-2');
  await Promise.all([reader.waitForURL(BASE + '/'), reader.getByRole('button', { name: 'Log in' }).click()]);
  await reader.getByRole('link', { name: NAME }).waitFor();
  await anon.close();
});
