// Pith's web forum in a real browser: Debian's Chromium driven by
// playwright-core. Run through run.sh, which starts the server and sets
// PITH_URL, PITH_ADMIN_TOKEN and PITH_SCREENSHOTS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, ADMIN, ARGS, PASSWORD, api, register, open } from './lib.mjs';

const SHOTS = process.env.PITH_SCREENSHOTS;
assert.ok(BASE && ADMIN && SHOTS, 'run through tests/browser/run.sh');

const run = Date.now().toString(36).slice(-5);

let browser;


/// A page that fails the test on any dialog (alert, confirm) and counts
/// navigations, so "without reload" can be checked.

async function markNoReload(page) {
  await page.evaluate(() => { window.__still = true; });
}
async function assertNoReload(page) {
  assert.equal(await page.evaluate(() => window.__still === true), true, 'the page was not reloaded');
}


async function login(page, name) {
  await page.goto(BASE + '/login');
  await page.getByLabel('Username').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await Promise.all([page.waitForURL(BASE + '/'), page.getByRole('button', { name: 'Log in' }).click()]);
}

before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
  // Something to look at: communities and topics for the screenshots.
  const communities = [
    ['raspi', 'Raspberry Pi', 'Small computers, big projects.'],
    ['rust', 'Rust', 'The Rust programming language.'],
    ['selfhost', 'Self-hosting', 'Running your own services at home.'],
  ];
  for (const [name, title, description] of communities) {
    await api('POST', '/communities', { name, title, description });
  }
  const topics = [
    ['selfhost', 'What do you run on your home server?', 'Mine: a forum, a git mirror and backups. Yours?'],
    ['rust', 'Async Rust on a Raspberry Pi 4: notes from a year in production', null, 'https://example.org/async-pi'],
    ['raspi', 'Passive cooling cases, compared', 'I measured five cases under a sustained load.'],
    ['rust', 'Why does the borrow checker reject this loop?', 'A minimal example in the body.'],
  ];
  for (const [community, title, body, url] of topics) {
    const t = await api('POST', `/communities/${community}/topics`, { title, body, url });
    await api('POST', `/topics/${t.id}/vote`, { value: 1 });
  }
});

after(async () => {
  await browser?.close();
});

const shared = {};

test('register, create a topic, reply and vote without reloads; a second browser sees the reply live', async () => {
  const alice = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await open(alice);
  await register(page, 'alice' + run);
  await page.goto(BASE + '/submit?c=raspi');
  await page.getByLabel('Title').fill('Show us your Pi cluster');
  await page.getByLabel('Text (optional, Markdown)').fill('Mine has **four** nodes and runs *Pith*.\n\n- k3s\n- a NAS');
  await Promise.all([page.waitForURL(/\/t\/\d+$/), page.getByRole('button', { name: 'Submit' }).click()]);
  const topicUrl = page.url();
  shared.topicPath = new URL(topicUrl).pathname;
  assert.equal(await page.locator('h1').innerText(), 'Show us your Pi cluster');

  // A second browser (signed out) has the topic open and waits for posts.
  const bob = await browser.newContext();
  const watcher = await open(bob);
  // Live posts are built from the event itself: no request per post.
  const fragments = [];
  watcher.on('request', (r) => { if (/^\/t\/\d+\/p\/\d+$/.test(new URL(r.url()).pathname)) fragments.push(r.url()); });
  const subscribed = watcher.waitForResponse((r) => r.url().includes('/api/v1/live/sse'));
  await watcher.goto(topicUrl);
  await subscribed;
  await markNoReload(watcher);

  await markNoReload(page);
  await page.getByLabel('Add a comment').fill('First! Here is mine: three Pi 5s and a switch.');
  await page.getByRole('button', { name: 'Comment' }).click();
  const mine = page.locator('#thread .post').filter({ hasText: 'three Pi 5s' });
  await mine.waitFor();
  await assertNoReload(page);
  const postId = (await mine.getAttribute('id')).slice(1);
  shared.postId = postId;

  // The watcher gets it live, in place.
  await watcher.locator('#p' + postId).waitFor({ timeout: 10000 });
  assert.match(await watcher.locator('#p' + postId).innerText(), /three Pi 5s/);
  await assertNoReload(watcher);

  // A nested reply, inline.
  await mine.getByRole('link', { name: 'reply' }).click();
  await page.getByLabel('Reply to this comment').fill('How do you **power** them?');
  await page.locator('.inline-reply').getByRole('button', { name: 'Reply' }).click();
  const nested = page.locator(`#p${postId} .replies .post`).filter({ hasText: 'How do you power them?' });
  await nested.waitFor();
  await watcher.locator(`#p${postId} .replies .post`).filter({ hasText: 'power' }).waitFor({ timeout: 10000 });
  // Someone else answers through the API; it arrives live on both pages.
  const nestedId = Number((await nested.getAttribute('id')).slice(1));
  const topicId = Number(shared.topicPath.split('/').pop());
  await api('POST', `/topics/${topicId}/posts`, { body: 'PoE hats on all of them, one cable each. `dmesg` says they draw ~6 W.', parent_id: nestedId });
  for (const p of [page, watcher]) await p.locator(`#p${nestedId} .replies .post`).filter({ hasText: 'PoE hats' }).waitFor({ timeout: 10000 });
  assert.deepEqual(fragments, [], 'no post was fetched');
  // The built comment matches the server's markup: a link to its author, its time, a reply link.
  const built = watcher.locator(`#p${nestedId} .replies .post`).filter({ hasText: 'PoE hats' });
  assert.equal(await built.locator('.who a').innerText(), 'admin');
  assert.match(await built.locator(':scope > details > .actions .reply-link').getAttribute('href'), /\/reply\?to=\d+$/);
  assert.match(await built.locator('code').innerText(), /dmesg/);

  // Votes, without reload; the score survives a reload.
  await page.locator('.topic .vote.up').click();
  await page.locator('.topic .vote.up.on').waitFor();
  assert.equal(await page.locator('.topic [data-score]').innerText(), '1');
  await page.locator(`#p${postId} > details > .actions .vote.up`).click();
  await page.locator(`#p${postId} > details > .actions .vote.up.on`).waitFor();
  await assertNoReload(page);
  await watcher.waitForFunction((id) => document.querySelector(`#p${id} [data-score]`).textContent === '1', postId);
  await page.reload();
  assert.equal(await page.locator('.topic [data-score]').innerText(), '1');
  assert.equal(await page.locator(`#p${postId} [data-score]`).first().innerText(), '1');
  await page.locator('#thread').scrollIntoViewIfNeeded();

  // Screenshots: the front page and this topic.
  await page.goto(topicUrl);
  await page.screenshot({ path: join(SHOTS, 'topic.png') });
  await page.goto(BASE + '/');
  await page.screenshot({ path: join(SHOTS, 'front.png') });
  assert.deepEqual([...page.dialogs, ...watcher.dialogs], []);
  assert.deepEqual([...page.errors, ...watcher.errors], []);
  await alice.close();
  await bob.close();
});

test('an XSS attempt renders inert, fires no dialog, and the CSP blocks inline script', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx);
  await register(page, 'mallory' + run);
  const token = ADMIN;
  const t = await api('POST', '/communities/rust/topics', {
    title: '<script>alert("title")</script><img src=x onerror=alert("title-img")>',
    body: '<script>alert("body")</script>\n\n<img src=x onerror=alert("img")>\n\n[click me](javascript:alert("link"))'
      + '\n\n<a href="#" onclick="alert(\'a\')">inline handler</a> <svg onload=alert("svg")></svg>',
  }, token);
  await api('POST', `/topics/${t.id}/posts`, { body: '<iframe srcdoc="<script>alert(1)</script>"></iframe> **bold** <details open ontoggle=alert("toggle")>' }, token);
  const violations = [];
  await page.exposeFunction('__violation', (v) => violations.push(v));
  await page.addInitScript(() => document.addEventListener('securitypolicyviolation', (e) => window.__violation(e.violatedDirective)));
  await page.goto(BASE + '/t/' + t.id);
  await page.waitForLoadState('networkidle');
  assert.match(await page.locator('h1').innerText(), /<script>alert\("title"\)<\/script>/, 'the title shows as text');
  assert.equal(await page.locator('main script, main img[src="x"], main iframe, main svg, main [onclick], main [onerror]').count(), 0);
  const link = page.getByText('click me');
  assert.equal(await link.getAttribute('href'), null, 'the javascript: link lost its href');
  await link.click();
  await page.getByText('inline handler').click();
  // An inline script injected at run time is refused by the policy.
  const ran = await page.evaluate(() => {
    const s = document.createElement('script');
    s.textContent = 'window.__inline = 1';
    document.body.append(s);
    return window.__inline === 1;
  });
  assert.equal(ran, false, 'inline script ran');
  await page.waitForTimeout(200);
  assert.ok(violations.some((v) => v.startsWith('script-src')), `CSP reported: ${violations}`);
  assert.deepEqual(page.dialogs, [], 'no dialog fired');
  await ctx.close();
});

test('keyboard: Tab reaches the vote and reply controls with a visible focus ring, Enter replies', async () => {
  const ctx = await browser.newContext();
  const page = await open(ctx);
  await login(page, 'alice' + run);
  await page.goto(BASE + shared.topicPath);
  const seen = new Set();
  for (let i = 0; i < 60 && !(seen.has('vote') && seen.has('reply')); i++) {
    await page.keyboard.press('Tab');
    const f = await page.evaluate(() => {
      const el = document.activeElement;
      const s = getComputedStyle(el);
      const kind = el.matches('.post button.vote') ? 'vote' : el.matches('.post a.reply-link') ? 'reply' : el.tagName;
      return { kind, outline: s.outlineStyle, width: parseFloat(s.outlineWidth) };
    });
    if (f.kind === 'vote' || f.kind === 'reply') {
      assert.notEqual(f.outline, 'none', `${f.kind} has a visible focus outline`);
      assert.ok(f.width >= 2, `${f.kind} outline width ${f.width}`);
      seen.add(f.kind);
    }
  }
  assert.deepEqual([...seen].sort(), ['reply', 'vote'], 'Tab reached a vote button and a reply link');
  // Enter on the focused reply link opens the inline form, focused.
  await page.keyboard.press('Enter');
  const area = page.locator('.inline-reply textarea');
  await area.waitFor();
  assert.equal(await area.evaluate((el) => el === document.activeElement), true);
  await page.keyboard.type('Typed with the keyboard only.');
  // Tab passes the picture input, then reaches the Reply button.
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.matches('.inline-reply .picture input[type=file]')), true);
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.matches('.inline-reply button[type=submit]')), true);
  await page.keyboard.press('Enter');
  await page.locator('.post > details > .body').filter({ hasText: 'Typed with the keyboard only.' }).waitFor();
  // Collapsing a thread with the keyboard: focus its summary, press Enter.
  const summary = page.locator('#thread .post > details > summary').first();
  await summary.focus();
  await page.keyboard.press('Enter');
  assert.equal(await page.locator('#thread .post > details').first().evaluate((d) => d.open), false);
  assert.deepEqual(page.dialogs, []);
  await ctx.close();
});

test('a 360 px phone does not scroll sideways on the front and topic pages', async () => {
  const ctx = await browser.newContext({ viewport: { width: 360, height: 740 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const page = await open(ctx);
  for (const path of ['/', shared.topicPath, '/c', '/login', '/c/rust']) {
    await page.goto(BASE + path);
    const { scroll, inner } = await page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth,
      inner: window.innerWidth,
    }));
    assert.ok(scroll <= inner, `${path}: scrollWidth ${scroll} > innerWidth ${inner}`);
  }
  await page.goto(BASE + shared.topicPath);
  await page.screenshot({ path: join(SHOTS, 'phone.png') });
  await ctx.close();
});

test('with JavaScript off a user logs in, posts a topic and replies: forms post and redirect', async () => {
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  const page = await open(ctx);
  await login(page, 'alice' + run);
  await page.goto(BASE + '/submit?c=selfhost');
  await page.getByLabel('Title').fill('Posted without JavaScript');
  await page.getByLabel('Text (optional, Markdown)').fill('Plain *forms* still work.');
  await Promise.all([page.waitForURL(/\/t\/\d+$/), page.getByRole('button', { name: 'Submit' }).click()]);
  const topic = page.url();
  await page.getByLabel('Add a comment').fill('A reply from a plain form.');
  await Promise.all([page.waitForURL(/\/t\/\d+#p\d+$/), page.getByRole('button', { name: 'Comment' }).click()]);
  const post = page.locator('.post').filter({ hasText: 'A reply from a plain form.' });
  await post.waitFor();
  // Replying to a comment goes through the reply page.
  await Promise.all([page.waitForURL(/\/reply\?to=\d+$/), post.getByRole('link', { name: 'reply' }).click()]);
  await page.getByLabel('Your reply').fill('And a nested one.');
  await Promise.all([page.waitForURL(/\/t\/\d+#p\d+$/), page.getByRole('button', { name: 'Reply' }).click()]);
  await post.locator('.replies .post').filter({ hasText: 'And a nested one.' }).waitFor();
  // Voting is a form too; it comes back to the page.
  await Promise.all([page.waitForURL(topic), page.locator('.topic .vote.up').click()]);
  assert.equal(await page.locator('.topic [data-score]').innerText(), '1');
  // Times stay absolute without the script.
  assert.match(await page.locator('.topic time').innerText(), /UTC$/);
  await ctx.close();
});

test('a moderator removes a comment from the topic page; another browser sees it removed after a reload', async () => {
  // A moderator of c/raspi, made through the API.
  const name = 'mod' + run;
  await fetch(BASE + '/api/v1/auth/register', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: name, password: PASSWORD }),
  }).then((r) => assert.equal(r.status, 201));
  const appointed = await fetch(`${BASE}/api/v1/communities/raspi/moderators/${name}`, {
    method: 'PUT', headers: { authorization: 'Bearer ' + ADMIN },
  });
  assert.equal(appointed.status, 204);

  const reader = await browser.newContext();
  const watcher = await open(reader, shared.topicPath);
  const comment = `#p${shared.postId} > details > .body`;
  assert.match(await watcher.locator(comment).innerText(), /three Pi 5s/);

  const modCtx = await browser.newContext();
  const page = await modCtx.newPage();
  page.on('dialog', (d) => d.accept()); // "Remove this comment?"
  await login(page, name);
  await page.goto(BASE + shared.topicPath);
  const post = page.locator('#p' + shared.postId);
  await Promise.all([
    page.waitForURL(new RegExp(`#p${shared.postId}$`)),
    post.locator(':scope > details > .actions').getByRole('button', { name: 'remove' }).click(),
  ]);
  // The moderator still reads it, marked removed, with a restore button.
  await post.locator(':scope > details > summary .tag', { hasText: 'removed' }).waitFor();
  assert.match(await post.locator(':scope > details > .body').innerText(), /three Pi 5s/);
  await post.locator(':scope > details > .actions').getByRole('button', { name: 'restore' }).waitFor();
  await page.setViewportSize({ width: 1280, height: 860 });
  await page.locator('.modbar').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(SHOTS, 'moderation.png') });

  // The signed-out reader, after a reload, sees it gone.
  await watcher.reload();
  const gone = watcher.locator(`#p${shared.postId} > details > .gone-text`);
  assert.equal(await gone.innerText(), '[removed by a moderator]');
  assert.doesNotMatch(await watcher.locator('#thread').innerText(), /three Pi 5s/);
  // And the public log says who did it.
  await watcher.goto(BASE + '/c/raspi/modlog');
  assert.match(await watcher.locator('.log').innerText(), new RegExp(`${name} removed a comment`));
  await reader.close();
  await modCtx.close();
});

test('a deep thread shows ten levels and a link that continues it, with JavaScript off; live replies keep to the cut', async () => {
  const topic = await api('POST', '/communities/raspi/topics', { title: 'Turtles all the way down ' + run });
  const chain = [];
  for (let i = 0; i < 25; i++) {
    chain.push((await api('POST', `/topics/${topic.id}/posts`, { body: `Level ${i}`, parent_id: chain.at(-1) ?? null })).id);
  }
  const continueLink = (p) => p.getByRole('link', { name: 'continue this thread →' });

  // Without JavaScript: ten levels, then a plain link to the thread under the tenth, and on.
  const off = await browser.newContext({ javaScriptEnabled: false });
  const page = await open(off, `/t/${topic.id}`);
  assert.equal(await page.locator('#thread .post').count(), 10);
  assert.equal(await continueLink(page).count(), 1);
  await Promise.all([page.waitForURL(`${BASE}/t/${topic.id}?thread=${chain[9]}`), continueLink(page).click()]);
  assert.equal(await page.locator('#thread .post').count(), 10);
  assert.equal(await page.locator(`#p${chain[18]}`).count(), 1);
  await Promise.all([page.waitForURL(`${BASE}/t/${topic.id}?thread=${chain[18]}`), continueLink(page).click()]);
  assert.equal(await page.locator('#thread .post').count(), 7, 'the end of the chain');
  assert.equal(await continueLink(page).count(), 0);
  await off.close();

  // With JavaScript, live: a reply within ten levels arrives in place, one past them becomes
  // the link under its parent, one to a comment not shown is only counted.
  const on = await browser.newContext();
  const watcher = await open(on);
  const subscribed = watcher.waitForResponse((r) => r.url().includes('/api/v1/live/sse'));
  await watcher.goto(`${BASE}/t/${topic.id}`);
  await subscribed;
  const tenth = await api('POST', `/topics/${topic.id}/posts`, { body: 'At the tenth level', parent_id: chain[8] });
  await watcher.locator(`#p${chain[8]} > details > .replies > #p${tenth.id}`).waitFor({ timeout: 10000 });
  const past = await api('POST', `/topics/${topic.id}/posts`, { body: 'Past it', parent_id: tenth.id });
  await api('POST', `/topics/${topic.id}/posts`, { body: 'Far below', parent_id: chain[20] });
  await watcher.waitForFunction(() => document.querySelector('[data-count]').textContent === '28 comments');
  const link = watcher.locator(`#p${tenth.id} > details > .replies > .more a`);
  assert.equal(await link.getAttribute('href'), `/t/${topic.id}?thread=${tenth.id}`);
  assert.equal(await watcher.locator(`#p${past.id}`).count(), 0);
  assert.equal(await watcher.locator('#thread .post').count(), 11);
  assert.deepEqual([...page.errors, ...watcher.errors], []);
  await on.close();
});

test('reply, then the inbox badge: a reply and a mention raise the count live; the inbox page lists them and marks them read', async () => {
  const context = await browser.newContext();
  const page = await open(context);
  const carol = 'carol' + run;
  await register(page, carol);
  const inbox = page.locator('#inbox-link');
  assert.equal(await inbox.innerText(), 'Inbox');
  await page.goto(BASE + '/submit?c=rust');
  await page.getByLabel('Title').fill('Lifetimes in async closures');
  await Promise.all([page.waitForURL(/\/t\/\d+$/), page.getByRole('button', { name: 'Submit' }).click()]);
  const topicId = Number(new URL(page.url()).pathname.split('/').pop());
  // Signed in, one stream carries the topic and the inbox.
  const subscribed = page.waitForResponse((r) => r.url().includes('/inbox/live'));
  await page.reload();
  await subscribed;
  await markNoReload(page);

  // Someone replies to Carol's topic: the reply shows up and the badge counts it, without a reload.
  const reply = await api('POST', `/topics/${topicId}/posts`, { body: 'Try `async move` and a boxed future.' });
  await page.locator('#p' + reply.id).waitFor({ timeout: 10000 });
  await page.waitForFunction(() => document.getElementById('inbox-link').textContent === 'Inbox (1)', null, { timeout: 10000 });
  // A mention in a reply to someone else's comment counts too.
  await api('POST', `/topics/${topicId}/posts`, { body: `@${carol} see above`, parent_id: reply.id });
  await page.waitForFunction(() => document.getElementById('inbox-link').textContent === 'Inbox (2)', null, { timeout: 10000 });
  await assertNoReload(page);
  const mention = page.locator('#thread .post').filter({ hasText: 'see above' }).locator(`a[href="/u/${carol}"]`);
  assert.equal(await mention.innerText(), '@' + carol, 'the mention links to the profile');

  // The inbox page: newest first, each linking to its comment; mark all read.
  await Promise.all([page.waitForURL(BASE + '/inbox'), inbox.click()]);
  assert.equal(await page.locator('#inbox-link').innerText(), 'Inbox (2)');
  const items = page.locator('ul.inbox li');
  assert.equal(await items.count(), 2);
  assert.match(await items.nth(0).innerText(), /mentioned you/);
  assert.match(await items.nth(1).innerText(), /replied to you/);
  await Promise.all([page.waitForURL(BASE + '/inbox'), page.getByRole('button', { name: 'Mark all read' }).click()]);
  assert.equal(await page.locator('#inbox-link').innerText(), 'Inbox');
  assert.equal(await page.locator('ul.inbox li.unread').count(), 0);
  await Promise.all([page.waitForURL(new RegExp(`/t/${topicId}\\?thread=${reply.id}#p${reply.id}$`)), items.nth(1).locator('a').last().click()]);
  await page.locator('#p' + reply.id).waitFor();
  assert.deepEqual(page.dialogs, []);
  assert.deepEqual(page.errors, []);
  await context.close();
});
