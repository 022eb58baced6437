// A Fedify peer (@fedify/fedify, pinned in package.json) on 127.0.0.1 that
// federates with a running Pith: one Person, "alice", that discovers a Pith
// community by WebFinger, NodeInfo and its actor document, follows it with
// a signed Follow, and takes Pith's Accept only after Fedify itself has
// verified its HTTP signature (skipSignatureVerification is never set);
// receives the Group's Announce of a topic posted on Pith (signed too);
// a second actor, bob, on a second server follows too; alice posts a Page
// into the community (which the Group announces to bob's server), replies
// to it with a Note, Likes the local topic and posts a Note replying to
// nothing (a topic, titled by its first line), each checked through Pith's
// API (the Page a topic by alice@HOST, the Note its reply, the topic's
// score 1); a local member's vote on alice's topic comes back as the
// Group's Announce of that member's Like; then both undo their follows,
// and bob, his account deleted at home, sends the Delete of himself.
// Phase 2, the other way round: Fedify hosts a Group, "tech", which a Pith
// user finds (!tech@HOST) and follows; the Group accepts and announces
// alice's Page, which Pith shows as a topic of tech@HOST; the Pith user's
// reply and vote reach the Group's inbox (signatures verified by Fedify),
// and so does the Undo of the follow. Every step checks what it got and
// exits 1 with the reason on the first failure. Run by tests/federation/run.sh:
//   PITH_ADMIN_TOKEN=... node peer.mjs PITH_URL COMMUNITY
import http from "node:http";
import {
  Accept, Announce, Create, createFederation, Delete, Endpoints, Follow, generateCryptoKeyPair, getNodeInfo, Group, Like,
  MemoryKvStore, Note, Page, Person, PUBLIC_COLLECTION, Undo,
} from "@fedify/fedify";

const [pith, community] = process.argv.slice(2);
if (!pith || !community) fail("usage: node peer.mjs PITH_URL COMMUNITY");
const pithHost = new URL(pith).host;

function fail(why) {
  console.error(`peer: FAIL: ${why}`);
  process.exit(1);
}
function step(what) {
  console.log(`peer: ok: ${what}`);
}
function within(ms, promise, what) {
  return Promise.race([promise, new Promise((_, no) => setTimeout(() => no(new Error(`timed out: ${what}`)), ms))]);
}

// Loopback and plain http are private addresses to Fedify: allowed here,
// as --federation-allow-private allows them to Pith.
const federation = createFederation({ kv: new MemoryKvStore(), allowPrivateAddress: true });
const keys = await generateCryptoKeyPair("RSASSA-PKCS1-v1_5");
const bobKeys = await generateCryptoKeyPair("RSASSA-PKCS1-v1_5");
const techKeys = await generateCryptoKeyPair("RSASSA-PKCS1-v1_5");
const accepted = [];
let onAccept = () => {};
let onAnnounce = () => {};

federation
  .setActorDispatcher("/users/{identifier}", async (ctx, identifier) => {
    const [pair] = await ctx.getActorKeyPairs(identifier);
    if (identifier === "tech") {
      return new Group({
        id: ctx.getActorUri(identifier),
        preferredUsername: identifier,
        name: "Tech on Fedify",
        summary: "<p>A <b>Group</b> hosted by Fedify</p>",
        inbox: ctx.getInboxUri(identifier),
        endpoints: new Endpoints({ sharedInbox: ctx.getInboxUri() }),
        publicKey: pair.cryptographicKey,
      });
    }
    if (identifier !== "alice" && identifier !== "bob") return null;
    return new Person({
      id: ctx.getActorUri(identifier),
      preferredUsername: identifier,
      name: identifier === "alice" ? "Alice of Fedify" : "Bob of Fedify",
      inbox: ctx.getInboxUri(identifier),
      endpoints: new Endpoints({ sharedInbox: ctx.getInboxUri() }),
      publicKey: pair.cryptographicKey,
    });
  })
  .setKeyPairsDispatcher(async (_ctx, identifier) =>
    identifier === "alice" ? [keys] : identifier === "bob" ? [bobKeys] : identifier === "tech" ? [techKeys] : []);

// What the Group's inbox got (phase 2), each after Fedify verified it.
const toGroup = [];
let onToGroup = () => {};

federation.setInboxListeners("/users/{identifier}/inbox", "/inbox").on(Accept, async (_ctx, accept) => {
  // Only reached once Fedify has verified the request's signature against
  // the key of the actor that signed it, fetched from Pith.
  accepted.push(accept);
  onAccept(accept);
}).on(Announce, async (_ctx, announce) => {
  onAnnounce(announce);
}).on(Follow, async (ctx, follow) => {
  // A Pith user follows the Group: accepted, as Lemmy's Groups do.
  if (follow.objectId?.href !== ctx.getActorUri("tech").href) return;
  const follower = await follow.getActor(ctx);
  await ctx.sendActivity({ identifier: "tech" }, follower, new Accept({
    id: new URL(`${follow.id.href}/accept`), actor: ctx.getActorUri("tech"), object: follow,
  }));
  toGroup.push(follow);
  onToGroup(follow);
}).on(Create, async (_ctx, create) => {
  toGroup.push(create);
  onToGroup(create);
}).on(Like, async (_ctx, like) => {
  toGroup.push(like);
  onToGroup(like);
}).on(Undo, async (_ctx, undo) => {
  toGroup.push(undo);
  onToGroup(undo);
});

async function handle(req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const request = new Request(new URL(req.url, `http://${req.headers.host}`), {
    method: req.method,
    headers,
    body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
  });
  const response = await federation.fetch(request, { contextData: undefined });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}
// Two servers (two hosts to Pith: the port is part of the host): alice's,
// and bob's, a second follower that gets what alice sends, forwarded.
const server = http.createServer(handle);
const server2 = http.createServer(handle);
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
await new Promise((ok) => server2.listen(0, "127.0.0.1", ok));
const base2 = `http://127.0.0.1:${server2.address().port}`;
const ctx2 = federation.createContext(new URL(base2), undefined);
const bob = ctx2.getActorUri("bob");
const base = `http://127.0.0.1:${server.address().port}`;
const ctx = federation.createContext(new URL(base), undefined);
const alice = ctx.getActorUri("alice");
step(`Fedify peer listening at ${base}, actor ${alice.href}`);

try {
  // Discovery: WebFinger by acct:, as any server resolves !community@host.
  const wf = await fetch(`${pith}/.well-known/webfinger?resource=acct:${community}@${pithHost}`);
  if (wf.status !== 200) fail(`WebFinger answered ${wf.status}`);
  const jrd = await wf.json();
  const self = jrd.links?.find((l) => l.rel === "self" && l.type === "application/activity+json");
  if (!self?.href) fail(`WebFinger has no self link: ${JSON.stringify(jrd)}`);
  step(`WebFinger acct:${community}@${pithHost} -> ${self.href}`);

  const info = await getNodeInfo(pith, { allowPrivateAddress: true });
  if (info?.software?.name !== "pith" || !info.protocols?.includes("activitypub")) {
    fail(`NodeInfo not understood: ${JSON.stringify(info)}`);
  }
  step(`NodeInfo: ${info.software.name} ${info.software.version?.major}.${info.software.version?.minor}, protocols ${info.protocols}`);

  // The actor document, parsed by Fedify's own vocabulary.
  const group = await ctx.lookupObject(self.href);
  if (!(group instanceof Group)) fail(`${self.href} is not a Group: ${group?.constructor?.name}`);
  const key = await group.getPublicKey();
  if (!group.inboxId || !group.followersId || !key?.publicKey) fail("the Group lacks an inbox, followers or key");
  step(`Group ${group.id.href}: inbox ${group.inboxId.href}, key ${key.id.href}`);

  // Follow, signed by Fedify; Pith verifies it and answers with an Accept.
  const follow = new Follow({ id: new URL(`${base}/follows/1`), actor: alice, object: group.id });
  const gotAccept = new Promise((ok) => (onAccept = ok));
  await ctx.sendActivity({ identifier: "alice" }, group, follow);
  step("Follow delivered (Pith answered 2xx)");
  const accept = await within(15000, gotAccept, "Pith's Accept");
  if (accept.actorId?.href !== group.id.href) fail(`Accept from ${accept.actorId?.href}, not the Group`);
  const object = await accept.getObject();
  if (!(object instanceof Follow) || object.id?.href !== follow.id.href) fail("the Accept does not accept our Follow");
  step("Accept received, its HTTP signature verified by Fedify, accepting our Follow");

  // Fedify does verify: an unsigned Accept to the same inbox is refused.
  const forged = await fetch(`${base}/users/alice/inbox`, {
    method: "POST",
    headers: { "content-type": "application/activity+json" },
    body: JSON.stringify(await accept.toJsonLd()),
  });
  if (forged.status < 400) fail(`an unsigned Accept was taken (${forged.status})`);
  if (accepted.length !== 1) fail(`${accepted.length} Accepts taken`);
  step(`an unsigned copy of the Accept is refused (${forged.status})`);

  const followers = await (await fetch(group.followersId, { headers: { accept: "application/activity+json" } })).json();
  if (followers.totalItems !== 1) fail(`followers: ${JSON.stringify(followers)}`);
  step("Pith counts 1 follower");

  // A topic posted on Pith reaches the follower as the Group's Announce
  // of its author's Create(Page), signed by the Group.
  const gotAnnounce = new Promise((ok) => (onAnnounce = ok));
  const posted = await fetch(`${pith}/api/v1/communities/${community}/topics`, {
    method: "POST",
    headers: { authorization: `Bearer ${process.env.PITH_ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ title: "Hello, Fediverse", body: "Posted on *Pith*" }),
  });
  if (posted.status !== 201) fail(`posting a topic on Pith answered ${posted.status}`);
  const announce = await within(20000, gotAnnounce, "the Group's Announce");
  if (announce.actorId?.href !== group.id.href) fail(`Announce from ${announce.actorId?.href}, not the Group`);
  const create = await announce.getObject();
  if (!(create instanceof Create)) fail(`the Announce wraps a ${create?.constructor?.name}, not a Create`);
  const page = await create.getObject();
  if (!(page instanceof Page) || page.name?.toString() !== "Hello, Fediverse") {
    fail(`the Create carries ${page?.constructor?.name} ${page?.name}`);
  }
  step(`Announce(Create(Page "${page.name}")) received from the Group, its signature verified by Fedify`);
  const localTopic = (await posted.json()).id;

  // Bob, on a second server, follows the community too.
  const bobAccepted = new Promise((ok) => (onAccept = ok));
  await ctx2.sendActivity({ identifier: "bob" }, group, new Follow({ id: new URL(`${base2}/follows/1`), actor: bob, object: group.id }));
  const bobAccept = await within(15000, bobAccepted, "Pith's Accept of bob's Follow");
  if ((await bobAccept.getObject())?.actorId?.href !== bob.href) fail("the second Accept is not bob's");
  step(`a second follower, ${bob.href}, on another server: Follow accepted`);

  // Alice posts into the community: a Page, sent as Fedify sends it. The
  // Group announces it to bob's server (not back to alice's).
  const forwarded = new Promise((ok) => (onAnnounce = async (a) => {
    const inner = await a.getObject();
    if (inner instanceof Create && inner.actorId?.href === alice.href) ok(inner);
  }));
  const api = async (path) => {
    const res = await fetch(`${pith}/api/v1${path}`);
    if (res.status !== 200) fail(`GET ${path} answered ${res.status}`);
    return res.json();
  };
  const pageId = new URL(`${base}/pages/1`);
  await ctx.sendActivity({ identifier: "alice" }, group, new Create({
    id: new URL(`${base}/pages/1/create`), actor: alice, to: PUBLIC_COLLECTION, cc: group.id,
    object: new Page({
      id: pageId, attribution: alice, to: PUBLIC_COLLECTION, cc: group.id, audience: group.id,
      name: "From Fedify", content: "<p>Written on <b>Fedify</b> &amp; sent as HTML</p>",
    }),
  }));
  const aliceName = `alice@${new URL(base).host}`;
  const listing = await api(`/communities/${community}/topics?sort=new`);
  const remoteTopic = (listing.topics ?? listing.items ?? []).find((t) => t.title === "From Fedify");
  if (!remoteTopic) fail(`the Page is not a topic of ${community}: ${JSON.stringify(listing)}`);
  if (remoteTopic.author !== aliceName) fail(`the topic's author is ${remoteTopic.author}, not ${aliceName}`);
  const shown = await api(`/topics/${remoteTopic.id}`);
  if (shown.topic.body !== "Written on Fedify & sent as HTML") fail(`the topic's body: ${JSON.stringify(shown.topic.body)}`);
  step(`Create(Page) taken: topic ${remoteTopic.id} by ${aliceName}, its HTML made text`);
  const relayed = await within(20000, forwarded, "the Group's Announce of alice's Create to bob");
  const relayedPage = await relayed.getObject();
  if (!(relayedPage instanceof Page) || relayedPage.id?.href !== pageId.href) {
    fail(`the forwarded Create carries ${relayedPage?.constructor?.name} ${relayedPage?.id?.href}`);
  }
  step("Announce(Create(Page by alice)) received on bob's server from the Group, its signature verified by Fedify");

  // A Note replying to the Page.
  await ctx.sendActivity({ identifier: "alice" }, group, new Create({
    id: new URL(`${base}/notes/1/create`), actor: alice, to: PUBLIC_COLLECTION, cc: group.id,
    object: new Note({
      id: new URL(`${base}/notes/1`), attribution: alice, to: PUBLIC_COLLECTION, cc: group.id,
      replyTarget: pageId, content: "<p>and a reply</p>",
    }),
  }));
  const thread = await api(`/topics/${remoteTopic.id}`);
  if (thread.posts?.[0]?.body !== "and a reply" || thread.posts[0].author !== aliceName) {
    fail(`the Note is not the topic's reply: ${JSON.stringify(thread.posts)}`);
  }
  step(`Create(Note) taken: a reply by ${aliceName}`);

  // A Like of the local member's topic.
  await ctx.sendActivity({ identifier: "alice" }, group, new Like({
    id: new URL(`${base}/likes/1`), actor: alice, object: new URL(`${pith}/ap/t/${localTopic}`),
  }));
  const liked = await api(`/topics/${localTopic}`);
  if (liked.topic.score !== 1) fail(`the local topic's score after the Like is ${liked.topic.score}`);
  step("Like taken: the local topic's score is 1");

  // A Note replying to nothing, naming the Group (as Mastodon posts to a
  // Lemmy community): a topic titled by its first line.
  await ctx.sendActivity({ identifier: "alice" }, group, new Create({
    id: new URL(`${base}/notes/2/create`), actor: alice, to: PUBLIC_COLLECTION, cc: group.id,
    object: new Note({
      id: new URL(`${base}/notes/2`), attribution: alice, to: PUBLIC_COLLECTION, cc: group.id,
      content: `<p><a href="${group.id.href}" class="mention">@${community}</a> A toot for the group<br>with more</p>`,
    }),
  }));
  const tooted = (await api(`/communities/${community}/topics?sort=new`)).topics?.find((t) => t.title === "A toot for the group");
  if (!tooted || tooted.author !== aliceName) fail(`the Note is not a topic by ${aliceName}`);
  step(`Create(Note) replying to nothing taken: topic ${tooted.id} "${tooted.title}"`);

  // A local member's vote on alice's topic goes out as that member's Like
  // of alice's Page, announced by the Group.
  const gotLike = new Promise((ok) => (onAnnounce = async (a) => {
    const inner = await a.getObject();
    if (inner instanceof Like && inner.objectId?.href === pageId.href) ok(inner);
  }));
  const voted = await fetch(`${pith}/api/v1/topics/${remoteTopic.id}/vote`, {
    method: "POST",
    headers: { authorization: `Bearer ${process.env.PITH_ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ value: 1 }),
  });
  if (voted.status !== 200) fail(`voting on Pith answered ${voted.status}`);
  const localLike = await within(20000, gotLike, "the Group's Announce of the local Like");
  if (localLike.actorId?.href !== `${pith}/ap/u/admin`) fail(`the Like is by ${localLike.actorId?.href}, not the voter`);
  step("a local vote on alice's topic: Announce(Like of alice's Page by the voter) received");

  await ctx.sendActivity({ identifier: "alice" }, group, new Undo({ id: new URL(`${base}/follows/1/undo`), actor: alice, object: follow }));
  await ctx2.sendActivity({ identifier: "bob" }, group, new Undo({
    id: new URL(`${base2}/follows/1/undo`), actor: bob,
    object: new Follow({ id: new URL(`${base2}/follows/1`), actor: bob, object: group.id }),
  }));
  const after = await (await fetch(group.followersId, { headers: { accept: "application/activity+json" } })).json();
  if (after.totalItems !== 0) fail(`followers after Undo: ${JSON.stringify(after)}`);
  step("Undo(Follow) of both delivered; Pith counts 0 followers");

  // bob's account is deleted at home: his server sends the Delete of the
  // actor itself, and Pith deletes bob's user there, keeping his reply
  // under no name.
  const bobName = `bob@${new URL(base2).host}`;
  await ctx2.sendActivity({ identifier: "bob" }, group, new Create({
    id: new URL(`${base2}/notes/1/create`), actor: bob, to: PUBLIC_COLLECTION, cc: group.id,
    object: new Note({
      id: new URL(`${base2}/notes/1`), attribution: bob, to: PUBLIC_COLLECTION, cc: group.id,
      replyTarget: pageId, content: "<p>bob was here</p>",
    }),
  }));
  const bobsReply = async () => ((await api(`/topics/${remoteTopic.id}`)).posts ?? []).find((p) => p.body === "bob was here");
  if ((await bobsReply())?.author !== bobName) fail(`bob's Note is not a reply by ${bobName}`);
  await ctx2.sendActivity({ identifier: "bob" }, group, new Delete({
    id: new URL(`${base2}/users/bob#delete`), actor: bob, to: PUBLIC_COLLECTION, object: bob,
  }));
  const kept = await bobsReply();
  if (!kept || kept.author !== null) fail(`bob's reply after his Delete: ${JSON.stringify(kept)}`);
  const bobProfile = await fetch(`${pith}/api/v1/users/${encodeURIComponent(bobName)}`);
  if (bobProfile.status !== 404) fail(`bob's profile after his Delete answered ${bobProfile.status}`);
  step(`Delete of bob by himself taken: ${bobName} is gone, his reply kept under no name`);

  // Phase 2: a Pith user joins the Group Fedify hosts.
  const asAdmin = (method, path, body) => fetch(`${pith}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${process.env.PITH_ADMIN_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const host = new URL(base).host;
  const found = await asAdmin("POST", "/resolve", { q: `!tech@${host}` });
  if (found.status !== 200) fail(`resolving !tech@${host} answered ${found.status}: ${await found.text()}`);
  const tech = await found.json();
  if (tech.name !== `tech@${host}` || tech.title !== "Tech on Fedify" || tech.description.trim() !== "A Group hosted by Fedify") {
    fail(`the Group as Pith keeps it: ${JSON.stringify(tech)}`);
  }
  step(`!tech@${host} found by WebFinger and kept as ${tech.name} ("${tech.title}")`);
  const next = (what, test) => within(20000, new Promise((ok) => (onToGroup = (a) => test(a) && ok(a))), what);
  const gotFollow = next("the Pith user's Follow", (a) => a instanceof Follow);
  const followed = await asAdmin("POST", `/communities/${tech.name}/follow`);
  if (followed.status !== 202) fail(`following answered ${followed.status}`);
  const pithFollow = await gotFollow;
  if (pithFollow.actorId?.href !== `${pith}/ap/u/admin`) fail(`the Follow is by ${pithFollow.actorId?.href}`);
  step("the Pith user's Follow reached the Group's inbox, its signature verified by Fedify; the Group accepts");
  const followState = async () => (await (await asAdmin("GET", `/communities/${tech.name}/follow`)).json()).following;
  for (let i = 0; i < 200 && (await followState()) !== "accepted"; i++) await new Promise((ok) => setTimeout(ok, 50));
  if ((await followState()) !== "accepted") fail("Pith never took the Group's Accept");
  step("Pith took the Group's Accept: following");

  // The Group announces alice's Page to its follower, Pith.
  const pithUser = await ctx.lookupObject(`${pith}/ap/u/admin`);
  const techPage = new URL(`${base}/pages/2`);
  await ctx.sendActivity({ identifier: "tech" }, pithUser, new Announce({
    id: new URL(`${base}/announces/1`), actor: ctx.getActorUri("tech"), to: PUBLIC_COLLECTION,
    object: new Create({
      id: new URL(`${base}/pages/2/create`), actor: alice, to: PUBLIC_COLLECTION, cc: ctx.getActorUri("tech"),
      object: new Page({
        id: techPage, attribution: alice, to: PUBLIC_COLLECTION, cc: ctx.getActorUri("tech"),
        audience: ctx.getActorUri("tech"), name: "Announced by a Fedify Group", content: "<p>From the Group</p>",
      }),
    }),
  }));
  const techTopics = await api(`/communities/${encodeURIComponent(tech.name)}/topics?sort=new`);
  const techTopic = (techTopics.topics ?? []).find((t) => t.title === "Announced by a Fedify Group");
  if (!techTopic || techTopic.author !== aliceName) fail(`the announced Page is not a topic of ${tech.name}: ${JSON.stringify(techTopics)}`);
  step(`the Group's Announce(Create(Page)) taken: topic ${techTopic.id} in ${tech.name} by ${aliceName}`);

  // The Pith user replies and votes: both go to the Group's inbox.
  const gotReply = next("the Pith user's reply", (a) => a instanceof Create);
  const replied = await asAdmin("POST", `/topics/${techTopic.id}/posts`, { body: "A reply from *Pith*" });
  if (replied.status !== 201) fail(`replying answered ${replied.status}`);
  const replyCreate = await gotReply;
  const note = await replyCreate.getObject();
  if (!(note instanceof Note) || note.replyTargetId?.href !== techPage.href || replyCreate.actorId?.href !== `${pith}/ap/u/admin`) {
    fail(`the reply reached the Group as ${note?.constructor?.name} replying to ${note?.replyTargetId?.href}`);
  }
  step("the Pith user's reply reached the Group as Create(Note) in reply to the Page, signature verified by Fedify");
  const gotVote = next("the Pith user's vote", (a) => a instanceof Like);
  const voted2 = await asAdmin("POST", `/topics/${techTopic.id}/vote`, { value: 1 });
  if (voted2.status !== 200) fail(`voting answered ${voted2.status}`);
  const like = await gotVote;
  if (like.objectId?.href !== techPage.href) fail(`the Like is of ${like.objectId?.href}`);
  step("the Pith user's vote reached the Group as a Like of the Page");
  const gotUndo = next("the Undo of the Follow", (a) => a instanceof Undo);
  const unfollowed = await asAdmin("DELETE", `/communities/${tech.name}/follow`);
  if (unfollowed.status !== 204) fail(`unfollowing answered ${unfollowed.status}`);
  const undo = await gotUndo;
  const undone = await undo.getObject();
  if (!(undone instanceof Follow) || undone.id?.href !== pithFollow.id?.href) fail("the Undo does not undo the Follow");
  step("unfollowing sent the Undo of the Follow to the Group");
  console.log("peer: all steps passed");
} catch (e) {
  fail(e?.stack ?? String(e));
} finally {
  server.close();
  server2.close();
}
process.exit(0);
