// The provider token timeline of a session: one stacked bar per LLM call (ledger record) on a time axis,
// then the calls as a table with their correlation ids and the tools they asked for.
import { fmt, h, svg, table } from './api.js';

const SEGMENTS = [['input', 'inputTokens', 'input'], ['cacheRead', 'cacheReadTokens', 'cache read'], ['cacheWrite', 'cacheWriteTokens', 'cache write'], ['output', 'outputTokens', 'output']];
const total = (r) => SEGMENTS.reduce((n, [, f]) => n + (r[f] ?? 0), 0);
const short = (n) => (n >= 1e6 ? `${+(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${+(n / 1e3).toFixed(1)}k` : String(n));

/** 1, 2 or 5 times a power of ten, at least `n`. */
function nice(n) {
  const p = 10 ** Math.floor(Math.log10(Math.max(1, n)));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= n);
}

function timeLabel(t, span) {
  const d = new Date(t);
  const hm = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', ...(span < 180_000 ? { second: '2-digit' } : {}) });
  return span > 86_400_000 ? `${d.toLocaleDateString([], { month: 'numeric', day: 'numeric' })} ${hm}` : hm;
}

function chart(turns, width) {
  const H = 170; const m = { l: 48, r: 14, t: 10, b: 34 };
  const W = Math.max(300, width);
  const pw = W - m.l - m.r; const ph = H - m.t - m.b;
  const times = turns.map((r) => Date.parse(r.timestamp));
  let t0 = Math.min(...times); let t1 = Math.max(...times);
  if (t1 - t0 < 60_000) { const c = (t0 + t1) / 2; t0 = c - 30_000; t1 = c + 30_000; }
  const pad = (t1 - t0) * 0.04; t0 -= pad; t1 += pad;
  const x = (t) => m.l + ((t - t0) / (t1 - t0)) * pw;
  const max = nice(Math.max(1, ...turns.map(total)));
  const y = (v) => m.t + ph - (v / max) * ph;
  const bw = Math.min(16, Math.max(2, (pw / turns.length) * 0.7));
  // Calls close in time would hide each other: each bar moves right just enough to be seen (then back from the end).
  const xs = times.map(x);
  for (let i = 1; i < xs.length; i++) xs[i] = Math.max(xs[i], xs[i - 1] + bw + 1);
  for (let i = xs.length - 1; i >= 0; i--) xs[i] = Math.min(xs[i], (i === xs.length - 1 ? m.l + pw - bw / 2 : xs[i + 1] - bw - 1));
  const yTicks = [0, max / 2, max];
  const ticks = W < 500 ? 3 : 5;
  const xTicks = Array.from({ length: ticks }, (_, i) => t0 + pad + ((t1 - t0 - 2 * pad) * i) / (ticks - 1));
  return svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Tokens of ${turns.length} LLM calls over time` },
    svg('g', { class: 'grid' }, yTicks.map((v) => svg('line', { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v) }))),
    svg('g', { class: 'axis' },
      svg('line', { x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph }),
      yTicks.map((v) => svg('text', { x: m.l - 6, y: y(v) + 3, 'text-anchor': 'end', text: short(v) })),
      xTicks.map((t, i) => svg('text', { x: x(t), y: H - m.b + 14, 'text-anchor': i === 0 ? 'start' : i === ticks - 1 ? 'end' : 'middle', text: timeLabel(t, t1 - t0) })),
      svg('text', { x: 10, y: m.t + ph / 2, transform: `rotate(-90 10 ${m.t + ph / 2})`, 'text-anchor': 'middle', text: 'tokens' }),
      svg('text', { x: m.l + pw / 2, y: H - 4, 'text-anchor': 'middle', text: 'time of the call (local)' })),
    turns.map((r, i) => {
      let top = m.t + ph;
      const segs = SEGMENTS.filter(([, f]) => r[f]).map(([name, f]) => {
        const hgt = (r[f] / max) * ph; top -= hgt;
        return svg('rect', { class: `seg-${name}`, x: xs[i] - bw / 2, y: top, width: bw, height: Math.max(hgt, 0.5) });
      });
      const tip = `${new Date(r.timestamp).toLocaleString()} · ${r.kind} · ${r.providerId}/${r.modelId}\n`
        + SEGMENTS.map(([, f, label]) => `${label} ${fmt(r[f])}`).join(' · ') + (r.isEstimated ? ' (estimated)' : '')
        + (r.toolCalls?.length ? `\ntools: ${r.toolCalls.join(', ')}` : '') + `\ncorrelation id ${r.correlationId}`;
      return svg('g', { class: r.isEstimated ? 'bar est' : 'bar' }, svg('title', { text: tip }), segs);
    }));
}

/** Renders `turns` (oldest first) into `container`; redraws on resize. */
export function renderTimeline(container, turns) {
  if (!turns.length) {
    container.turns = turns;
    container.replaceChildren(h('p', { class: 'muted', text: 'No LLM calls recorded for this key yet.' }));
    return;
  }
  const open = container.querySelector('details')?.open ?? false;
  container.replaceChildren(
    chart(turns, container.clientWidth),
    h('div', { class: 'legend' }, SEGMENTS.map(([name, , label]) => h('span', {}, h('i', { class: `seg-${name}` }), label)), h('span', { text: 'faded: estimated (no usage reported)' })),
    h('details', { open }, h('summary', { text: `${turns.length} call${turns.length === 1 ? '' : 's'}` }), h('div', { class: 'table-wrap' }, table([
      ['time', (r) => new Date(r.timestamp).toLocaleTimeString()],
      ['kind', (r) => r.kind],
      ['model', (r) => r.modelId],
      ['input', (r) => fmt(r.inputTokens) + (r.isEstimated ? '*' : ''), 'num'],
      ['output', (r) => fmt(r.outputTokens), 'num'],
      ['cache read', (r) => fmt(r.cacheReadTokens), 'num'],
      ['cache write', (r) => fmt(r.cacheWriteTokens), 'num'],
      ['tools called', (r) => (r.toolCalls ?? []).join(', ')],
      ['correlation id', (r) => h('span', { class: 'mono', text: r.correlationId })],
    ], turns.slice().reverse()))));
  // Redrawn to the container's width when it changes (window resized, narrow layout).
  container.turns = turns;
  container.drawnWidth = container.clientWidth;
  container.observer ??= new ResizeObserver(() => {
    if (container.clientWidth === container.drawnWidth || !container.turns?.length) return;
    container.drawnWidth = container.clientWidth;
    container.querySelector('svg')?.replaceWith(chart(container.turns, container.clientWidth));
  });
  container.observer.observe(container);
}
