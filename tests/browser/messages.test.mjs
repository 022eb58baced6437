// Issue #21's private messages and user blocks in a real browser: a
// message sent from a profile (JavaScript off) raises the recipient's inbox
// badge live, shows in their conversations and reads as read once opened,
// and can be reported; blocking a user collapses their comments for the
// blocker only, those already there and those arriving live, until
// unblocked from the blocks page. Run through run.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { BASE, ADMIN, ARGS, PASSWORD, api, register, open } from './lib.mjs';

assert.ok(BASE && ADMIN, 'run through tests/browser/run.sh');

const run = Date.now().toString(36).slice(-5);
const COMMUNITY = 'msgs' + run;

let browser;
const seeded = {};




before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
  const troll = 'troll' + run;
  const session = await api('POST', '/auth/register', { username: troll, password: PASSWORD }, null);
  await api('POST', '/communities', { name: COMMUNITY, title: 'Messages', description: 'For the message tests.' });
  const topic = await api('POST', `/communities/${COMMUNITY}/topics`, { title: `Talk ${run}`, body: 'Be nice.' });
  const kind = await api('POST', `/topics/${topic.id}/posts`, { body: `A kind comment ${run}` });
  const rude = await api('POST', `/topics/${topic.id}/posts`, { body: `A rude comment ${run}` }, session.token);
  Object.assign(seeded, { troll, trollToken: session.token, topic: topic.id, kind: kind.id, rude: rude.id });
});

after(async () => {
  await browser?.close();
});

test('message: one sent from a profile without JavaScript raises the recipient\'s badge live and reads as read', async () => {
  const recipient = 'reader' + run;
  const sender = 'writer' + run;
  const theirs = await browser.newContext();
  const inboxPage = await open(theirs);
  await register(inboxPage, recipient);
  const subscribed = inboxPage.waitForResponse((r) => r.url().includes('/inbox/live'));
  await inboxPage.goto(BASE + '/messages');
  await subscribed;
  assert.equal(await inboxPage.locator('#inbox-link').innerText(), 'Inbox');
  assert.match(await inboxPage.locator('main').innerText(), /No messages yet/);

  const mine = await browser.newContext({ javaScriptEnabled: false });
  const page = await open(mine);
  await register(page, sender);
  await page.goto(BASE + `/u/${recipient}`);
  await Promise.all([page.waitForURL(BASE + `/messages/${recipient}`), page.getByRole('link', { name: 'Send a message' }).click()]);
  await page.getByLabel(`Message to ${recipient}`).fill(`Hello **there** ${run}`);
  await Promise.all([page.waitForURL(new RegExp(`/messages/${recipient}#m\\d+$`)), page.getByRole('button', { name: 'Send' }).click()]);
  assert.match(await page.locator('ol.messages').innerText(), new RegExp(`Hello there ${run}`));
  assert.equal(await page.locator('ol.messages strong', { hasText: 'there' }).count(), 1, 'rendered as Markdown');

  // The recipient's header hears of it without a reload.
  await inboxPage.waitForFunction(() => document.getElementById('inbox-link').textContent === 'Inbox (1)', null, { timeout: 10000 });
  await inboxPage.reload();
  const row = inboxPage.locator(`#c-${sender}`);
  assert.match(await row.innerText(), /1 unread/);
  await Promise.all([inboxPage.waitForURL(BASE + `/messages/${sender}`), row.getByRole('link', { name: sender }).click()]);
  assert.match(await inboxPage.locator('ol.messages').innerText(), new RegExp(`Hello there ${run}`));
  assert.equal(await inboxPage.locator('#inbox-link').innerText(), 'Inbox', 'opening it read it');

  // The recipient reports it; the sender's page shows it read.
  await inboxPage.locator('details.report summary').click();
  await inboxPage.getByLabel('Why report this message').fill('unsolicited');
  await Promise.all([inboxPage.waitForURL(BASE + `/messages/${sender}?reported=1`), inboxPage.getByRole('button', { name: 'Report' }).click()]);
  assert.match(await inboxPage.locator('[role=status]').innerText(), /Reported to the administrators/);
  await page.reload();
  assert.match(await page.locator('ol.messages li.mine').innerText(), /read/);
  assert.deepEqual([...page.errors, ...inboxPage.errors], []);
  await mine.close();
  await theirs.close();
});

test('block: a blocked user\'s comments collapse for the blocker only, and open again once unblocked', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx);
  await register(page, 'blocker' + run);
  const topicPath = `/t/${seeded.topic}`;
  const rude = page.locator(`#p${seeded.rude} > details`);
  const kind = page.locator(`#p${seeded.kind} > details`);
  await page.goto(BASE + topicPath);
  assert.equal(await rude.getAttribute('open'), '');

  await page.goto(BASE + `/u/${seeded.troll}`);
  await Promise.all([page.waitForURL(BASE + `/u/${seeded.troll}`), page.getByRole('button', { name: 'Block', exact: true }).click()]);
  await page.getByRole('button', { name: 'Unblock', exact: true }).waitFor();
  await page.goto(BASE + topicPath);
  assert.equal(await rude.getAttribute('open'), null, 'collapsed');
  assert.equal(await kind.getAttribute('open'), '', 'the others stay open');
  assert.match(await rude.locator('summary').innerText(), /blocked/);
  assert.equal(await rude.getByText(`A rude comment ${run}`).isVisible(), false);
  await rude.locator('summary').click();
  // isVisible does not wait: the details element opens on the click's task.
  await rude.getByText(`A rude comment ${run}`).waitFor({ state: 'visible', timeout: 5000 });
  assert.equal(await rude.getAttribute('open'), '', 'one click away');

  const anon = await browser.newContext();
  const reader = await open(anon, topicPath);
  assert.equal(await reader.locator(`#p${seeded.rude} > details`).getAttribute('open'), '', 'not for anyone else');

  // A comment of theirs arriving live comes collapsed and tagged too, for
  // the blocker only.
  // Signed in, the stream is /inbox/live; signed out, /api/v1/live/sse.
  const subscribed = Promise.all([[page, '/inbox/live'], [reader, '/api/v1/live/sse']]
    .map(([p, stream]) => p.waitForResponse((r) => r.url().includes(stream))));
  await Promise.all([page.reload(), reader.reload()]);
  await subscribed;
  const later = await api('POST', `/topics/${seeded.topic}/posts`, { body: `Rude, live ${run}` }, seeded.trollToken);
  const arrived = page.locator(`#p${later.id} > details`);
  await arrived.waitFor({ state: 'attached' });
  assert.equal(await arrived.getAttribute('open'), null, 'collapsed as it arrives');
  assert.match(await arrived.locator('summary').innerText(), /blocked/);
  const seen = reader.locator(`#p${later.id} > details`);
  await seen.waitFor({ state: 'attached' });
  assert.equal(await seen.getAttribute('open'), '', 'open for everyone else');
  assert.doesNotMatch(await seen.locator('summary').innerText(), /blocked/);

  await page.goto(BASE + '/settings');
  await Promise.all([page.waitForURL(BASE + '/blocks'), page.getByRole('link', { name: 'Blocked users and communities' }).click()]);
  const item = page.locator(`#bu-${seeded.troll}`);
  await Promise.all([page.waitForURL(BASE + '/blocks'), item.getByRole('button', { name: 'Unblock', exact: true }).click()]);
  assert.equal(await page.locator(`#bu-${seeded.troll}`).count(), 0);
  await page.goto(BASE + topicPath);
  assert.equal(await rude.getAttribute('open'), '');
  assert.deepEqual([...page.errors, ...reader.errors], []);
  await ctx.close();
  await anon.close();
});
