// Pith's one script. Every page works without it; with it, new comments
// arrive live on an open topic, votes and replies happen without a reload,
// and times read "5 minutes ago". No framework, no build step.
'use strict';

(() => {
  const FETCH = { 'x-pith-fetch': '1' };

  // --- Relative times -----------------------------------------------------
  const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  const STEPS = [[60, 'second'], [60, 'minute'], [24, 'hour'], [7, 'day'], [4.35, 'week'], [12, 'month'], [Infinity, 'year']];

  function relative(date) {
    let n = (date.getTime() - Date.now()) / 1000;
    for (const [size, unit] of STEPS) {
      if (Math.abs(n) < size) return rtf.format(Math.round(n), unit);
      n /= size;
    }
    return date.toLocaleString();
  }

  function times(root) {
    for (const t of root.querySelectorAll('time[datetime]')) {
      const d = new Date(t.getAttribute('datetime'));
      if (isNaN(d)) continue;
      if (!t.title) t.title = d.toLocaleString();
      t.textContent = relative(d);
    }
  }

  // --- Small helpers ------------------------------------------------------
  function fromHtml(html) {
    // A <template> parses without running anything.
    const tpl = document.createElement('template');
    tpl.innerHTML = html.trim();
    return tpl.content.firstElementChild;
  }

  let status;
  function announce(text) {
    if (!status) {
      status = document.createElement('div');
      status.className = 'vh';
      status.setAttribute('role', 'status');
      document.body.append(status);
    }
    status.textContent = text;
  }

  function loginNext() {
    location.href = '/login?next=' + encodeURIComponent(location.pathname + location.search);
  }

  async function post(url, data) {
    const res = await fetch(url, { method: 'POST', body: new URLSearchParams(data), headers: FETCH, credentials: 'same-origin' });
    return res;
  }

  // --- Voting ---------------------------------------------------------------
  async function vote(btn) {
    const vf = document.getElementById('vf');
    const data = new FormData(vf);
    const box = btn.closest('.votes, .post');
    const on = btn.classList.contains('on');
    data.set('value', on ? '0' : btn.value);
    const res = await post(btn.formAction, data);
    if (res.status === 401) return loginNext();
    if (!res.ok) return announce(await res.text());
    const out = await res.json();
    const score = box.querySelector('[data-score]');
    if (score) score.textContent = out.score;
    for (const b of box.querySelectorAll(':scope .vote')) {
      if (b.closest('.votes, .post') === box) b.classList.toggle('on', String(out.vote) === b.value);
    }
  }

  // --- Comments -------------------------------------------------------------
  const thread = document.getElementById('thread');
  const topicId = thread && thread.dataset.topic;

  function placeFor(parentId) {
    const parent = parentId && document.getElementById('p' + parentId);
    return parent ? parent.querySelector(':scope > details > .replies') : thread;
  }

  // The topic's count, not the page's: a page may show only part of it.
  function bumpCount() {
    const count = document.querySelector('[data-count]');
    if (!count) return;
    const n = (parseInt(count.textContent, 10) || 0) + 1;
    count.textContent = n === 1 ? '1 comment' : n + ' comments';
  }

  function insertPost(el, parentId) {
    if (!el || document.getElementById(el.id)) return false;
    placeFor(parentId).append(el);
    times(el);
    el.classList.add('fresh');
    bumpCount();
    return true;
  }

  // Past the levels a page shows, a reply becomes the link the server
  // renders there: "continue this thread", to the thread under `parent`.
  function continueAt(parent) {
    const replies = parent.querySelector(':scope > details > .replies');
    if (!replies || replies.querySelector(':scope > .more')) return;
    const p = document.createElement('p');
    p.className = 'more';
    const a = document.createElement('a');
    a.href = `/t/${topicId}?thread=${parent.dataset.id}`;
    a.textContent = 'continue this thread →';
    p.append(a);
    replies.append(p);
  }

  async function sendReply(form) {
    const err = form.querySelector('.form-error');
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const data = new FormData(form);
      data.delete('file'); // a chosen picture was uploaded already
      const res = await post(form.action, data);
      if (res.status === 401 || res.status === 403) {
        err.textContent = await res.text();
        err.hidden = false;
        return;
      }
      if (!res.ok) {
        err.textContent = await res.text();
        err.hidden = false;
        return;
      }
      err.hidden = true;
      const el = fromHtml(await res.text());
      const parent = form.elements.parent.value;
      insertPost(el, parent);
      form.reset();
      if (form.id !== 'reply-top') form.remove();
      el.querySelector('summary').focus();
    } finally {
      button.disabled = false;
    }
  }

  let inlineCount = 0;
  function openReply(link) {
    const top = document.getElementById('reply-top');
    if (!top) return false; // signed out or locked: follow the link
    const article = link.closest('.post');
    const existing = article.querySelector(':scope > details > .inline-reply');
    if (existing) {
      existing.querySelector('textarea').focus();
      return true;
    }
    const form = top.cloneNode(true);
    const n = ++inlineCount;
    form.removeAttribute('id');
    form.classList.add('inline-reply');
    form.elements.parent.value = link.dataset.parent;
    const area = form.querySelector('textarea');
    area.id = 'reply-body-' + n;
    area.value = '';
    const label = form.querySelector('label');
    label.htmlFor = area.id;
    label.textContent = 'Reply to this comment';
    form.querySelector('.hint')?.remove();
    const file = form.querySelector('.picture input[type=file]');
    if (file) {
      file.id = 'reply-picture-' + n;
      form.querySelector('.picture label').htmlFor = file.id;
      form.querySelector('.picture .upload-status').textContent = '';
    }
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.className = 'linkish';
    cancel.textContent = 'Cancel';
    cancel.addEventListener('click', () => { form.remove(); link.focus(); });
    form.querySelector('button[type=submit]').after(cancel);
    form.querySelector('button[type=submit]').textContent = 'Reply';
    article.querySelector(':scope > details > .actions').after(form);
    area.focus();
    return true;
  }

  // --- Live updates (Server-Sent Events, docs/LIVE.md) -----------------------
  async function fetchPost(id) {
    const res = await fetch(`/t/${topicId}/p/${id}`, { headers: FETCH, credentials: 'same-origin' });
    return res.ok ? fromHtml(await res.text()) : null;
  }

  // A live event carries the post with its sanitized HTML: the page's
  // <template id="post-proto"> (a comment as this viewer sees one, with
  // their controls) is filled in, so no request is needed.
  const proto = document.getElementById('post-proto');

  function bodyOf(html) {
    const tpl = document.createElement('template');
    tpl.innerHTML = html;
    const div = document.createElement('div');
    div.className = 'body';
    div.append(tpl.content);
    return div;
  }

  function buildPost(post) {
    if (!proto || typeof post.body_html !== 'string') return null;
    const el = proto.content.firstElementChild.cloneNode(true);
    const [pid, pauthor] = [proto.dataset.id, proto.dataset.author];
    const author = post.author || '';
    for (const node of [el, ...el.querySelectorAll('*')]) {
      for (const a of node.attributes) {
        if (a.value.includes(pid) || a.value.includes(pauthor)) {
          a.value = a.value.replaceAll(pid, String(post.id)).replaceAll(pauthor, author);
        }
      }
    }
    const who = el.querySelector('.who');
    if (post.author) who.querySelector('a').textContent = post.author;
    else who.textContent = '[deleted]';
    const score = el.querySelector('[data-score]');
    score.textContent = post.score;
    score.nextSibling.textContent = Math.abs(post.score) === 1 ? ' point' : ' points';
    const time = el.querySelector('time');
    time.setAttribute('datetime', post.created_at);
    time.textContent = post.created_at;
    el.querySelector(':scope > details > .body').replaceWith(bodyOf(post.body_html));
    // A user the viewer blocked: collapsed and tagged, as the page shows
    // their comments that were there already.
    if (post.author && (proto.dataset.blocked || '').split(' ').includes(post.author)) {
      const details = el.querySelector(':scope > details');
      details.open = false;
      const tag = document.createElement('span');
      tag.className = 'tag blocked';
      tag.textContent = 'blocked';
      details.querySelector(':scope > summary').prepend(tag, ' ');
    }
    return el;
  }

  function depthOf(parentId) {
    let depth = 0;
    for (let at = parentId && document.getElementById('p' + parentId); at; at = at.parentElement.closest('.post')) depth++;
    return depth;
  }

  async function onEvent(ev) {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    if (msg.type === 'post' && String(msg.post.topic_id) === topicId) {
      if (document.getElementById('p' + msg.post.id)) return;
      const parentId = msg.post.parent_id;
      const parent = parentId && document.getElementById('p' + parentId);
      // A reply to a comment this page does not show (on another page, or
      // below a "continue this thread" link), or a top-level comment on a
      // thread's own page, is not this page's to show: only counted.
      if (parentId ? !parent : thread.dataset.root) {
        bumpCount();
        return;
      }
      const depth = depthOf(parentId);
      if (depth >= Number(thread.dataset.maxDepth)) {
        continueAt(parent);
        bumpCount();
        return;
      }
      const el = buildPost(msg.post) || await fetchPost(msg.post.id);
      // Indented by its depth on this page (a thread's page starts over).
      if (el) el.classList.toggle('deep', depth >= Number(thread.dataset.maxIndent));
      if (insertPost(el, parentId)) announce('New comment by ' + (msg.post.author || 'someone'));
    } else if (msg.type === 'score') {
      const box = msg.post_id == null ? document.querySelector('.topic .votes') : document.getElementById('p' + msg.post_id);
      const score = box && box.querySelector('[data-score]');
      if (score) score.textContent = msg.score;
    } else if (msg.type === 'post_edited') {
      const old = document.getElementById('p' + msg.post.id);
      const oldBody = old && old.querySelector(':scope > details > :is(.body, .gone-text)');
      if (!oldBody) return;
      let body;
      if (typeof msg.post.body_html === 'string') body = bodyOf(msg.post.body_html);
      else body = (await fetchPost(msg.post.id))?.querySelector(':scope > details > .body');
      if (body) oldBody.replaceWith(body);
    } else if (msg.type === 'post_removed') {
      const body = document.querySelector(`#p${msg.post_id} > details > .body`);
      if (body) {
        const p = document.createElement('p');
        p.className = 'gone-text';
        p.textContent = '[deleted]';
        body.replaceWith(p);
      }
    }
  }

  // --- The inbox count in the header ------------------------------------------
  const inboxLink = document.getElementById('inbox-link');
  const NOTICE = { reply: 'New reply', mention: 'You were mentioned', moderation: 'A moderator acted on your post', message: 'New message' };

  function setUnread(n) {
    if (!inboxLink || typeof n !== 'number') return;
    inboxLink.dataset.unread = String(n);
    inboxLink.textContent = n > 0 ? `Inbox (${n})` : 'Inbox';
  }

  function onInbox(msg) {
    setUnread(msg.unread);
    if (msg.kind) announce((NOTICE[msg.kind] || 'New notification') + ' in your inbox');
  }

  // Signed in, one stream carries the inbox and the open topic
  // (/inbox/live, with the session); signed out, the topic's public one.
  function live() {
    if (!window.EventSource) return;
    let url;
    if (inboxLink) url = '/inbox/live' + (topicId ? '?topics=' + encodeURIComponent(topicId) : '');
    else if (topicId) url = '/api/v1/live/sse?topics=' + encodeURIComponent(topicId);
    else return;
    const es = new EventSource(url, { withCredentials: true });
    es.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch { return; }
      if (msg.type === 'inbox') onInbox(msg);
      else if (topicId) onEvent(ev);
    };
    // EventSource reconnects by itself after an error.
  }

  // --- Pictures ---------------------------------------------------------------
  // A picture chosen, pasted or dropped is uploaded at once (POST /media,
  // with the page's CSRF token) with its progress shown, and its Markdown
  // goes into the text at the cursor. Without this script the form itself
  // carries the file and the server links it on submit.
  function altOf(name) {
    const stem = (name || '').replace(/\.[^.]*$/, '').replace(/[-_.]+/g, ' ').replace(/[^\p{L}\p{N} ]/gu, '').trim();
    return stem.slice(0, 100) || 'picture';
  }

  function insertAtCursor(area, text) {
    const [start, end] = [area.selectionStart ?? area.value.length, area.selectionEnd ?? area.value.length];
    const before = area.value.slice(0, start);
    const gap = before && !before.endsWith('\n\n') ? (before.endsWith('\n') ? '\n' : '\n\n') : '';
    area.setRangeText(gap + text + '\n', start, end, 'end');
    area.dispatchEvent(new Event('input', { bubbles: true }));
  }

  function uploadPicture(form, file) {
    const field = form.querySelector('.picture');
    const area = form.querySelector('textarea');
    if (!field || !area || !form.elements.csrf) return;
    const bar = field.querySelector('progress');
    const note = field.querySelector('.upload-status');
    const name = file.name || 'the picture';
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/media');
    xhr.setRequestHeader('x-csrf-token', form.elements.csrf.value);
    xhr.responseType = 'json';
    bar.value = 0;
    bar.hidden = false;
    note.textContent = `Uploading ${name}…`;
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) bar.value = Math.round((100 * e.loaded) / e.total);
    };
    xhr.onload = () => {
      bar.hidden = true;
      const out = xhr.response;
      if (xhr.status === 201 && out && out.url) {
        insertAtCursor(area, `![${altOf(file.name)}](${out.url})`);
        note.textContent = `Added ${name} (${out.width}×${out.height}).`;
      } else if (xhr.status === 401) {
        loginNext();
      } else {
        note.textContent = (out && out.error && out.error.message) || `The upload failed (${xhr.status}).`;
      }
    };
    xhr.onerror = () => {
      bar.hidden = true;
      note.textContent = 'The upload failed: the connection broke. Try again.';
    };
    const data = new FormData();
    data.append('file', file);
    xhr.send(data);
  }

  function imagesOf(list) {
    return [...(list || [])].filter((f) => f.type.startsWith('image/'));
  }

  document.addEventListener('change', (e) => {
    const input = e.target;
    if (!input.matches('.picture input[type=file]')) return;
    for (const file of input.files) uploadPicture(input.form, file);
    input.value = ''; // sent already: the form posts without it
  });

  document.addEventListener('paste', (e) => {
    const area = e.target;
    const files = imagesOf(e.clipboardData && e.clipboardData.files);
    if (!area.matches || !area.matches('textarea') || !area.form?.querySelector('.picture') || !files.length) return;
    e.preventDefault();
    for (const file of files) uploadPicture(area.form, file);
  });

  document.addEventListener('dragover', (e) => {
    const area = e.target.closest && e.target.closest('textarea');
    if (!area || !area.form?.querySelector('.picture') || ![...e.dataTransfer.types].includes('Files')) return;
    e.preventDefault();
    area.classList.add('dropping');
  });
  document.addEventListener('dragleave', (e) => {
    if (e.target.classList) e.target.classList.remove('dropping');
  });
  document.addEventListener('drop', (e) => {
    const area = e.target.closest && e.target.closest('textarea');
    if (!area || !area.form?.querySelector('.picture')) return;
    const files = imagesOf(e.dataTransfer.files);
    area.classList.remove('dropping');
    if (!files.length) return;
    e.preventDefault();
    area.focus();
    for (const file of files) uploadPicture(area.form, file);
  });

  // --- Wiring ---------------------------------------------------------------
  document.addEventListener('click', (e) => {
    const target = e.target.closest('button, a');
    if (!target) return;
    if (target.dataset.confirm && !window.confirm(target.dataset.confirm)) {
      e.preventDefault();
    } else if (target.matches('button.vote')) {
      e.preventDefault();
      vote(target).catch(() => announce('Voting failed; try again.'));
    } else if (target.matches('a.reply-link') && openReply(target)) {
      e.preventDefault();
    }
  });

  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (form.classList.contains('reply-form')) {
      e.preventDefault();
      sendReply(form).catch(() => { form.submit(); });
    }
  });

  times(document);
  setInterval(() => times(document), 60000);
  live();
})();
