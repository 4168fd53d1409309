// Small helpers shared by the dashboard's views: DOM building (text only, never HTML), the API, formatting, dialogs.

export const $ = (id) => document.getElementById(id);

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') el.textContent = value;
    else if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) if (child !== undefined && child !== null && child !== false) el.append(child);
  return el;
}

/** An HTML element; strings become text nodes. */
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
/** An SVG element. */
export const svg = (tag, attrs, ...children) => build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);

export const fmt = (n) => (n ?? 0).toLocaleString('en-US');
export const when = (t) => (t ? new Date(t).toLocaleString() : '');
export const sessionPath = (key) => `/admin/sessions/${encodeURIComponent(key)}`;

/** An API call error with the gateway's message and status. */
export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/**
 * Calls the gateway's API with the browser's session cookie (or the header a proxy adds). A 401 means the
 * session ended (signed out elsewhere, token changed): the page reloads into the sign-in page.
 */
export async function api(path, { method = 'GET', body } = {}) {
  const response = await fetch(path, {
    method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    location.reload();
    throw new ApiError('Signed out.', 401);
  }
  const data = await response.json().catch(() => undefined);
  if (!response.ok) throw new ApiError(data?.error?.message ?? `${method} ${path}: HTTP ${response.status}`, response.status);
  return data;
}

let toastTimer;
/** A short message at the bottom right, read out by screen readers. */
export function toast(text, bad = false) {
  const el = $('toast');
  el.textContent = text;
  el.className = bad ? 'toast bad' : 'toast';
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

/** Asks before an action; resolves true when confirmed. Escape or Cancel say no. */
export function confirmAction({ title, text, ok }) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = ok;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true }));
}

/** Runs a confirmed action, says how it went, and re-enables its button. */
export async function act(button, question, run) {
  if (!(await confirmAction(question))) return;
  button.disabled = true;
  try {
    toast(await run());
  } catch (e) {
    toast(e.message, true);
  } finally {
    button.disabled = false;
  }
}

/** A table from column definitions `[header, cell(row), className?]`. */
export function table(columns, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', { class: 'muted', text: empty });
  return h('table', {},
    h('thead', {}, h('tr', {}, columns.map(([title, , cls]) => h('th', { class: cls, text: title })))),
    h('tbody', {}, rows.map((row) => h('tr', {}, columns.map(([, cell, cls]) => {
      const value = cell(row);
      return h('td', { class: cls }, value instanceof Node ? value : String(value ?? ''));
    })))));
}

/** Calls `fn` once, `wait` ms after the last of a burst of calls. */
export function debounce(fn, wait) {
  let timer;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), wait);
  };
}
