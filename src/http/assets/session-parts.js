// Parts of a session shown in the session detail and in the web chat: the five token cards and the history.
import { fmt, h } from './api.js';
import { renderMarkdown } from './markdown.js';

const CARDS = [['input', 'input'], ['output', 'output'], ['cacheRead', 'cache read'], ['cacheWrite', 'cache write']];

/** The five token cards of an entry as `GET /admin/sessions/:key` gives it (all its turns, across resets). */
export function renderCards(container, entry) {
  const t = entry?.tokens ?? {};
  container.replaceChildren(
    ...CARDS.map(([field, label]) => card(field, label, t[field])),
    card('total', 'total', entry?.totalTokens, 'card total'),
  );
}

function card(name, label, value, cls = 'card') {
  return h('div', { class: cls, 'data-card': name }, h('span', { class: 'label', text: label }), h('span', { class: 'value', text: fmt(value) }));
}

const KB = (n) => (n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(n / 1024))} KB`);
const isImage = (mime) => /^image\//.test(mime ?? '');

/**
 * Files as a list: images as thumbnails linking to the file, anything else as a download link with its size.
 * `files`: `{ name, mime, size, url?, thumb? }` (a stored file's `url` is `/media/<sha256>?name=…`, served
 * under the page's own sign-in; `thumb` another URL to show, e.g. a `data:` URL before the upload is stored).
 */
export function renderFiles(files) {
  return h('ul', { class: 'files', 'data-role': 'files' }, ...files.map((f) => {
    const thumb = f.thumb ?? (isImage(f.mime) ? f.url : undefined);
    const label = `${f.name}${f.size ? ` (${KB(f.size)})` : ''}`;
    if (thumb) {
      const img = h('img', { class: 'thumb', src: thumb, alt: f.name, title: label, loading: 'lazy' });
      return h('li', { class: 'file image' }, f.url ? h('a', { href: f.url, target: '_blank', rel: 'noopener' }, img) : img);
    }
    return h('li', { class: 'file' }, f.url ? h('a', { href: f.url, download: f.name, text: `📎 ${label}` }) : h('span', { text: `📎 ${label}` }));
  }));
}

const mediaUrl = (sha256, name) => `/media/${sha256}${name ? `?name=${encodeURIComponent(name)}` : ''}`;

/**
 * A user entry's media records (SPEC §15): images as thumbnails (the downscaled copy the model saw, else the
 * original), linking to the original; anything else as its one line (what the model was told), linked when
 * the bytes are stored. An image passed through by URL is never loaded: its line only.
 */
export function mediaRecordItems(records) {
  const images = [];
  const lines = [];
  for (const r of records ?? []) {
    const shown = r.modelSha256 ?? (isImage(r.mime) ? r.sha256 : undefined);
    if (shown && isImage(r.mime)) images.push({ name: r.name ?? 'image', mime: r.mime, size: r.size, url: mediaUrl(r.sha256 ?? shown, r.name), thumb: mediaUrl(shown, r.name) });
    else lines.push(r);
  }
  return [
    ...(images.length ? [renderFiles(images)] : []),
    ...lines.map((r) => h('div', { class: 'media-line small', 'data-role': 'media-line' },
      r.sha256 ? h('a', { href: mediaUrl(r.sha256, r.name), download: r.name ?? true, text: r.line }) : r.line)),
  ];
}

const clip = (text, n) => (text.length > n ? `${text.slice(0, n)}…` : text);
const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : '');

function pretty(json) {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

/** One transcript entry as list items: messages (markdown), tool calls and results (collapsed), compactions. */
export function historyItems(entry, toolNames) {
  if (entry.type === 'compaction') {
    return [h('li', { class: 'msg notice' }, h('details', {},
      h('summary', { text: `earlier messages summarized (${fmt(entry.tokensBefore)} → ${fmt(entry.tokensAfter)} tokens)` }),
      renderMarkdown(h('div'), entry.summary)))];
  }
  if (entry.type !== 'message') return [];
  if (entry.role === 'tool') {
    const name = toolNames.get(entry.toolCallId) ?? 'tool';
    return [h('li', { class: 'msg tool', 'data-role': 'tool-result' }, h('details', {},
      h('summary', { text: `← ${name} result (${fmt(entry.content.length)} characters)` }), h('pre', { text: clip(entry.content, 4000) })))];
  }
  const items = [];
  const media = entry.role === 'user' ? entry.media ?? [] : [];
  if (entry.content || media.length) {
    const who = entry.role === 'user' ? (entry.name ?? 'user') : 'assistant';
    items.push(h('li', { class: `msg ${entry.role}`, 'data-role': entry.role },
      h('span', { class: 'who', text: `${who} · ${time(entry.at)}` }), entry.content ? renderMarkdown(h('div'), entry.content) : undefined, ...mediaRecordItems(media)));
  }
  for (const call of entry.toolCalls ?? []) {
    toolNames.set(call.id, call.name);
    items.push(h('li', { class: 'msg tool', 'data-role': 'tool-call' }, h('details', {},
      h('summary', { text: `→ ${call.name}` }), h('pre', { text: clip(pretty(call.arguments), 4000) }))));
  }
  return items;
}

/** Replaces a list's items with a history (oldest first), keeping the view at the bottom if it was there. */
export function renderHistory(list, entries, scroller = list) {
  const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
  const names = new Map();
  const items = entries.flatMap((e) => historyItems(e, names));
  list.replaceChildren(...(items.length ? items : [h('li', { class: 'msg notice', text: 'No messages in this session yet.' })]));
  if (atBottom) scroller.scrollTop = scroller.scrollHeight;
}
