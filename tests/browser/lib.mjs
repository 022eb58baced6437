// What the browser tests share: the server run.sh started, Chromium's
// launch flags, a page that records its errors and dialogs, and the API
// and registration helpers.
import assert from 'node:assert/strict';

export const BASE = process.env.PITH_URL;
export const ADMIN = process.env.PITH_ADMIN_TOKEN;
assert.ok(BASE, 'run through tests/browser/run.sh');

// Without these Chromium reaches for the network (which this machine does
// not have) and stalls; `launch` gives each run a fresh profile directory.
export const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
export const PASSWORD = 'correct-horse-9';

/** An API call that must succeed; its JSON (null for none). `token` null: signed out. */
export async function api(method, path, body, token = ADMIN) {
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = 'Bearer ' + token;
  const res = await fetch(BASE + '/api/v1' + path, { method, headers, body: body && JSON.stringify(body) });
  const json = res.status === 204 ? null : await res.json().catch(() => null);
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Signs `name` up through the page's form, with `PASSWORD`. */
export async function register(page, name) {
  await page.goto(BASE + '/register');
  await page.getByLabel('Username').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await Promise.all([page.waitForURL(BASE + '/'), page.getByRole('button', { name: 'Sign up' }).click()]);
  await page.getByRole('link', { name }).waitFor();
}

/**
 * A new page of `context` that records its script errors (`page.errors`)
 * and the dialogs it opened (`page.dialogs`), dismissing them unless
 * `acceptDialogs`; at `path` when given.
 */
export async function open(context, path, { acceptDialogs = false } = {}) {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.dialogs = [];
  page.on('dialog', async (d) => {
    page.dialogs.push(d.message());
    await (acceptDialogs ? d.accept() : d.dismiss());
  });
  if (path) await page.goto(BASE + path);
  return page;
}
