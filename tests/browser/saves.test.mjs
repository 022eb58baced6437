// Issue #21 in a real browser: saving and unsaving (without JavaScript),
// the saved page, the reader's own votes after a reload, and blocking a
// community from the front page. Run through run.sh, like forum.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { BASE, ADMIN, ARGS, PASSWORD, api, register, open } from './lib.mjs';

assert.ok(BASE && ADMIN, 'run through tests/browser/run.sh');

const run = Date.now().toString(36).slice(-5);
// Communities of this file's own, so it shares the server with forum.test.mjs.
const KEEP = 'keep' + run;
const HIDE = 'hide' + run;

let browser;
const seeded = {};




before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
  await api('POST', '/communities', { name: KEEP, title: 'Kept', description: 'Stays on the front page.' });
  await api('POST', '/communities', { name: HIDE, title: 'Hidden', description: 'Blocked in a test.' });
  const kept = await api('POST', `/communities/${KEEP}/topics`, { title: `Worth keeping ${run}`, body: 'Save me.' });
  const hidden = await api('POST', `/communities/${HIDE}/topics`, { title: `Soon hidden ${run}`, body: 'Block me.' });
  const post = await api('POST', `/topics/${kept.id}/posts`, { body: `A comment worth saving ${run}` });
  Object.assign(seeded, { kept: kept.id, hidden: hidden.id, post: post.id });
});

after(async () => {
  await browser?.close();
});

test('without JavaScript a reader saves a topic and a comment, finds them on the saved page and unsaves', async () => {
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  const page = await open(ctx);
  await register(page, 'saver' + run);
  const topicPath = `/t/${seeded.kept}`;
  await page.goto(BASE + topicPath);
  await Promise.all([page.waitForURL(BASE + topicPath), page.locator('.topic .actions').getByRole('button', { name: 'save' }).click()]);
  await page.locator('.topic .actions').getByRole('button', { name: 'unsave' }).waitFor();
  const comment = page.locator(`#p${seeded.post} > details > .actions`);
  await Promise.all([page.waitForURL(BASE + topicPath), comment.getByRole('button', { name: 'save' }).click()]);
  await comment.getByRole('button', { name: 'unsave' }).waitFor();

  await Promise.all([page.waitForURL(BASE + '/saved'), page.getByRole('link', { name: 'Saved', exact: true }).click()]);
  const topicItem = page.locator(`#s-topic-${seeded.kept}`);
  const postItem = page.locator(`#s-post-${seeded.post}`);
  assert.match(await topicItem.innerText(), new RegExp(`Worth keeping ${run}`));
  assert.match(await postItem.innerText(), new RegExp(`A comment worth saving ${run}`));
  // The comment's link leads to it in its thread.
  assert.equal(await postItem.getByRole('link', { name: `Worth keeping ${run}` }).getAttribute('href'),
    `/t/${seeded.kept}?thread=${seeded.post}#p${seeded.post}`);

  await Promise.all([page.waitForURL(BASE + '/saved'), topicItem.getByRole('button', { name: 'unsave' }).click()]);
  assert.equal(await page.locator(`#s-topic-${seeded.kept}`).count(), 0);
  assert.equal(await page.locator(`#s-post-${seeded.post}`).count(), 1);
  assert.deepEqual(page.dialogs, []);
  await ctx.close();
});

test('a reader\'s own votes show after a reload; a signed-out reader sees none', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx);
  await register(page, 'voter' + run);
  const topicPath = `/t/${seeded.kept}`;
  await page.goto(BASE + topicPath);
  await page.locator('.topic .vote.up').click();
  await page.locator('.topic .vote.up.on').waitFor();
  await page.locator(`#p${seeded.post} > details > .actions .vote.down`).click();
  await page.locator(`#p${seeded.post} > details > .actions .vote.down.on`).waitFor();
  await page.reload();
  assert.equal(await page.locator('.topic .vote.up.on').count(), 1, 'the topic vote is marked after a reload');
  assert.equal(await page.locator(`#p${seeded.post} > details > .actions .vote.down.on`).count(), 1);
  assert.equal(await page.locator('.vote.on').count(), 2);
  // Clicking a marked vote withdraws it, and the reload agrees.
  await page.locator('.topic .vote.up.on').click();
  await page.waitForFunction(() => !document.querySelector('.topic .vote.up.on'));
  await page.reload();
  assert.equal(await page.locator('.topic .vote.on').count(), 0);

  const anon = await browser.newContext();
  const reader = await open(anon, topicPath);
  assert.equal(await reader.locator('.vote.on').count(), 0);
  assert.equal(await reader.getByRole('button', { name: 'save' }).count(), 0);
  assert.deepEqual([...page.errors, ...reader.errors], []);
  await ctx.close();
  await anon.close();
});

test('blocking a community from its page hides it from the reader\'s front page until unblocked', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx);
  await register(page, 'blocker' + run);
  const front = async () => {
    await page.goto(BASE + '/?sort=new');
    return page.locator('main').innerText();
  };
  let text = await front();
  assert.match(text, new RegExp(`Soon hidden ${run}`));
  assert.match(text, new RegExp(`Worth keeping ${run}`));

  await page.goto(BASE + `/c/${HIDE}`);
  await Promise.all([page.waitForURL(BASE + `/c/${HIDE}`), page.getByRole('button', { name: 'Block from front page' }).click()]);
  await page.getByRole('button', { name: 'Unblock' }).waitFor();
  assert.match(await page.locator('main').innerText(), new RegExp(`Soon hidden ${run}`), 'the community page still lists it');
  text = await front();
  assert.doesNotMatch(text, new RegExp(`Soon hidden ${run}`));
  assert.match(text, new RegExp(`Worth keeping ${run}`));

  const anon = await browser.newContext();
  const reader = await open(anon, '/?sort=new');
  assert.match(await reader.locator('main').innerText(), new RegExp(`Soon hidden ${run}`), 'everyone else still sees it');

  await page.goto(BASE + `/c/${HIDE}`);
  await Promise.all([page.waitForURL(BASE + `/c/${HIDE}`), page.getByRole('button', { name: 'Unblock' }).click()]);
  await page.getByRole('button', { name: 'Block from front page' }).waitFor();
  assert.match(await front(), new RegExp(`Soon hidden ${run}`));
  assert.deepEqual([...page.dialogs, ...page.errors], []);
  await ctx.close();
  await anon.close();
});
