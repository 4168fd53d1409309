import fc from 'fast-check';

/**
 * Random markdown of the kind models write, for the renderers' property tests: paragraphs, headings,
 * lists, tables, code fences, quotes, inline code, links (short and 5,000 characters), emphasis, emoji
 * (ZWJ sequences, flags, skin tones), CJK, CRLF line ends and HTML-looking text. Each document comes with
 * the visible text it must show, in order (`fragments`). Words never contain markdown punctuation, so
 * every `*`, `_`, `~`, `|`, backtick or bracket in a rendered message is markup.
 */
export interface MarkdownCase {
  markdown: string;
  /** Pieces of visible text, in order (whitespace inside them does not matter). */
  fragments: string[];
}

export const EMOJI = ['👨‍👩‍👧‍👦', '🏳️‍🌈', '👩🏽‍💻', '👍🏿', '🇫🇷', '🇯🇵', '❤️', '🧑🏻‍🤝‍🧑🏿', '😀', 'é', '👁️‍🗨️'];
const CJK = '漢字仮名交じり文中文测试日本語한국어。、！？';
const HTMLISH = ['<b>', '</b>', '<div class="x">', '</p>', 'a<b', 'x>y', 'AT&T', '&&', '<script>', '<br/>', '"quoted"', "it's"];

type Piece = { md: string; fragments: string[] };

const letters = fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz'), minLength: 1, maxLength: 10 });
const cjk = fc.string({ unit: fc.constantFrom(...CJK), minLength: 1, maxLength: 12 });
const emoji = fc.array(fc.constantFrom(...EMOJI), { minLength: 1, maxLength: 4 }).map((a) => a.join(''));

/** One word: letters, CJK, emoji, HTML-looking text, or rarely an unbroken run longer than a message. */
const word: fc.Arbitrary<string> = fc.oneof(
  { weight: 400, arbitrary: letters },
  { weight: 100, arbitrary: cjk },
  { weight: 100, arbitrary: emoji },
  { weight: 60, arbitrary: fc.constantFrom(...HTMLISH) },
  { weight: 30, arbitrary: fc.constantFrom('.', ',', '!', '?', ':', '42', '3.14') },
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom('x', '漢', '👨‍👩‍👧‍👦', '🇫🇷', 'ab'), fc.integer({ min: 100, max: 800 })).map(([s, n]) => s.repeat(n)) },
  // A mention-like piece, sometimes far too long to be one (a splitter must still be able to cut it).
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('<@', '<#', '<@&'), fc.oneof(fc.integer({ min: 5, max: 20 }), fc.integer({ min: 2000, max: 4500 }))).map(([p, n]) => `${p}${'1'.repeat(n)}>`) },
);

/** A word of quoted text: Q and capitals, which no other generated text contains. */
const quotedWord = fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPRSTUVWXYZ'), minLength: 1, maxLength: 8 }).map((w) => `Q${w}`);

const words = (max: number) => fc.array(word, { minLength: 1, maxLength: max });
const plain = (max: number): fc.Arbitrary<Piece> => words(max).map((w) => ({ md: w.join(' '), fragments: w }));
/** Many words: an emphasis or a link label longer than a message. */
const longWords = fc.integer({ min: 150, max: 500 }).chain((n) => fc.array(letters, { minLength: n, maxLength: n }))
  .map((w) => ({ md: w.join(' '), fragments: w }));
const label = fc.oneof({ weight: 60, arbitrary: plain(4) }, { weight: 1, arbitrary: longWords });

const path = fc.string({ unit: fc.constantFrom(...'abcdefghij0123456789-/'), maxLength: 30 });
const shortUrl = path.map((p) => `https://example.com/${p}`);
const longUrl = fc.integer({ min: 4500, max: 5200 }).map((n) => `https://example.com/${'a1b2c3/'.repeat(Math.ceil(n / 7)).slice(0, n)}`);
const url = fc.oneof({ weight: 15, arbitrary: shortUrl }, { weight: 1, arbitrary: longUrl });

const codeText = fc.array(fc.constantFrom('let', 'x', '=', 'a < b && c > d;', 'if (a) { return "s"; }', '<div>', '漢字', '👍🏿', 'call(1, 2)'), { minLength: 1, maxLength: 6 })
  .map((a) => a.join(' '));

/** Emphasis around words; `**`, `*`, `_`, `~~`, and `||` only where the platform has spoilers. */
function emphasis(delimiters: readonly string[]): fc.Arbitrary<Piece> {
  return fc.tuple(fc.constantFrom(...delimiters), label).map(([d, l]) => ({ md: `${d}${l.md}${d}`, fragments: l.fragments }));
}

/** A link already in Slack's syntax, its URL percent-encoded, its label possibly emphasized. */
const slackLink: fc.Arbitrary<Piece> = fc.tuple(fc.constantFrom('a%7Cb', 'a%20b', 'x/y?q=1&r=2', 'p'), fc.constantFrom('', '*', '_', '`'), fc.array(letters, { minLength: 1, maxLength: 3 }))
  .map(([p, d, l]) => ({ md: `<https://example.com/${p}|${d}${l.join(' ')}${d}>`, fragments: l }));

/** Emphasis inside emphasis sharing a delimiter run: `**a *b***`, `***a** b*`. */
const mixedRuns: fc.Arbitrary<Piece> = fc.tuple(fc.boolean(), label, label).map(([inner, a, b]) => ({
  md: inner ? `**${a.md} *${b.md}***` : `***${a.md}** ${b.md}*`, fragments: [...a.fragments, ...b.fragments],
}));

/** A bold source line ending in a bare URL: `**Source: https://x**`. */
const boldUrl = (options: ArbitraryOptions): fc.Arbitrary<Piece> => fc.tuple(plain(3), shortUrl).map(([w, u]) => ({
  md: `**${w.md} ${u}**`, fragments: options.bareUrlIsText ? [...w.fragments, u] : w.fragments,
}));

function inline(options: ArbitraryOptions): fc.Arbitrary<Piece> {
  const both = options.emphasis.includes('*') && options.emphasis.includes('**');
  return fc.oneof(
    { weight: both ? 1 : 0, arbitrary: mixedRuns },
    { weight: 1, arbitrary: boldUrl(options) },
    { weight: 10, arbitrary: plain(8) },
    { weight: options.slackSyntax ? 2 : 0, arbitrary: slackLink },
    { weight: options.emptyLinkShowsUrl ? 1 : 0, arbitrary: shortUrl.map((u) => ({ md: `[](${u})`, fragments: [u] })) },
    { weight: 3, arbitrary: emphasis(options.emphasis) },
    { weight: 2, arbitrary: codeText.map((c) => ({ md: `\`${c}\``, fragments: [c] })) },
    { weight: 3, arbitrary: fc.tuple(label, url).map(([l, u]) => ({ md: `[${l.md}](${u})`, fragments: l.fragments })) },
    { weight: 1, arbitrary: url.map((u) => ({ md: u, fragments: options.bareUrlIsText ? [u] : [] })) },
  );
}

/** A line of inline pieces separated by spaces. */
function line(options: ArbitraryOptions, max = 5): fc.Arbitrary<Piece> {
  return fc.array(inline(options), { minLength: 1, maxLength: max }).map(join(' '));
}

function join(separator: string) {
  return (pieces: Piece[]): Piece => ({ md: pieces.map((p) => p.md).join(separator), fragments: pieces.flatMap((p) => p.fragments) });
}

function block(options: ArbitraryOptions): fc.Arbitrary<Piece> {
  const paragraph = fc.tuple(fc.array(line(options), { minLength: 1, maxLength: 3 }), fc.constantFrom('\n', '\r\n')).map(([lines, nl]) => ({
    md: lines.map((l) => l.md).join(nl), fragments: lines.flatMap((l) => l.fragments),
  }));
  const heading = fc.tuple(fc.integer({ min: 1, max: 3 }), line(options, 3)).map(([n, l]) => ({ md: `${'#'.repeat(n)} ${l.md}`, fragments: l.fragments }));
  const item = fc.tuple(fc.constantFrom('- ', '1. ', '  - '), line(options, 3)).map(([m, l]) => ({ md: `${m}${l.md}`, fragments: l.fragments }));
  const list = fc.array(item, { minLength: 1, maxLength: 6 }).map((items) => join('\n')([{ ...items[0]!, md: items[0]!.md.trimStart() }, ...items.slice(1)]));
  const quote = line(options, 3).map((l) => ({ md: `> ${l.md}`, fragments: l.fragments }));
  const cell = fc.oneof(letters, cjk, emoji);
  const table = fc.tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 12 })).chain(([cols, rows]) =>
    fc.array(fc.array(cell, { minLength: cols, maxLength: cols }), { minLength: rows, maxLength: rows }).map((cells) => ({
      md: [`| ${cells[0]!.join(' | ')} |`, `|${'---|'.repeat(cols)}`, ...cells.slice(1).map((r) => `| ${r.join(' | ')} |`)].join('\n'),
      fragments: cells.flat(),
    })));
  const fence = fc.tuple(fc.constantFrom('', 'ts', 'python'), fc.array(codeText, { minLength: 1, maxLength: 40 })).map(([lang, lines]) => ({
    md: `\`\`\`${lang}\n${lines.join('\n')}\n\`\`\``, fragments: lines,
  }));
  // Quoted text is made of QUOTED words (Q and capitals, nowhere else), so a test can check that every
  // line showing one is still quoted, also after a cut inside a long line or a quoted code block.
  const quotedLine = fc.array(quotedWord, { minLength: 1, maxLength: 60 }).map((w) => ({ md: w.join(' '), fragments: w }));
  const quotedFence = fc.tuple(fc.constantFrom('', 'ts'), fc.array(quotedLine, { minLength: 1, maxLength: 25 })).map(([lang, lines]) => ({
    md: [`> \`\`\`${lang}`, ...lines.map((l) => `> ${l.md}`), '> ```'].join('\n'), fragments: lines.flatMap((l) => l.fragments),
  }));
  const quoted = fc.array(fc.oneof({ weight: 3, arbitrary: quotedLine.map((l) => ({ ...l, md: `> ${l.md}` })) }, { weight: 1, arbitrary: quotedFence }), { minLength: 1, maxLength: 4 })
    .map(join('\n>\n'));
  // An unclosed quoted block, the next line prose: the quote (and the block) end there.
  const unclosedThenProse = fc.tuple(fc.array(quotedLine, { minLength: 1, maxLength: 3 }), fc.oneof(plain(8), longWords)).map(([lines, prose]) => ({
    md: ['> ```', ...lines.map((l) => `> ${l.md}`), prose.md].join('\n'), fragments: [...lines.flatMap((l) => l.fragments), ...prose.fragments],
  }));
  // A code block in a list item, on its own lines or opening on the marker line (`1. ```bash`).
  const itemFence = fc.tuple(fc.constantFrom('- ', '1. '), fc.boolean(), fc.array(codeText, { minLength: 1, maxLength: 20 })).map(([marker, onMarker, lines]) => {
    const indent = ' '.repeat(marker.length);
    const body = [...lines.map((l) => `${indent}${l}`), `${indent}\`\`\``].join('\n');
    return onMarker
      ? { md: `${marker}\`\`\`bash\n${body}`, fragments: lines }
      : { md: `${marker}step\n\n${indent}\`\`\`\n${body}`, fragments: ['step', ...lines] };
  });
  const weighted = (weight: number, arbitrary: fc.Arbitrary<Piece>) => ({ weight, arbitrary });
  return fc.oneof(
    weighted(6, paragraph),
    weighted(1, heading),
    weighted(2, list),
    weighted(1, quote),
    weighted(1, quoted),
    weighted(1, itemFence),
    weighted(1, unclosedThenProse),
    weighted(1, table),
    weighted(2, fence),
    weighted(1, fc.constant({ md: '---', fragments: [] })),
  );
}

/** What differs between platforms. */
export interface ArbitraryOptions {
  emphasis: readonly string[];
  /** A bare URL shows as itself (false where the renderer may write a long one differently). */
  bareUrlIsText: boolean;
  /** A link without text (`[](https://x)`) shows its URL. */
  emptyLinkShowsUrl?: boolean;
  /** Links already in Slack's syntax (`<https://x/a%7Cb|*docs*>`). */
  slackSyntax?: boolean;
}

/** A random markdown document with the text it must show. */
export function markdownCase(options: ArbitraryOptions): fc.Arbitrary<MarkdownCase> {
  return fc.tuple(fc.array(block(options), { minLength: 1, maxLength: 8 }), fc.constantFrom('\n\n', '\r\n\r\n')).map(([blocks, sep]) => ({
    markdown: blocks.map((b) => b.md).join(sep),
    fragments: blocks.flatMap((b) => b.fragments),
  }));
}

/** A message limit: mostly small ones, so that documents of a few thousand characters split often. */
export function limitFor(platform: number): fc.Arbitrary<number> {
  return fc.oneof({ weight: 2, arbitrary: fc.constant(platform) }, { weight: 3, arbitrary: fc.integer({ min: 200, max: platform }) }, { weight: 1, arbitrary: fc.integer({ min: 120, max: 200 }) });
}

/** Checks that `fragments` appear in `text` in order, whitespace ignored; returns the first missing one. */
export function missingFragment(text: string, fragments: readonly string[], normalize: (s: string) => string = (s) => s): string | undefined {
  const hay = normalize(text).replace(/\s+/g, '');
  let at = 0;
  for (const f of fragments) {
    const needle = normalize(f).replace(/\s+/g, '');
    if (!needle) continue;
    const found = hay.indexOf(needle, at);
    if (found < 0) return f;
    at = found + needle.length;
  }
  return undefined;
}

/** A lone surrogate (half of a pair sent on its own). */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** True when the end of `before` and the start of `after` would be one grapheme cluster if joined. */
export function cutsCluster(before: string, after: string): boolean {
  const a = before.slice(-16);
  const b = after.slice(0, 16);
  if (!a || !b) return false;
  // The cut is inside a cluster when no cluster of the joined text ends exactly where `before` ended.
  for (const { index } of segmenter.segment(a + b)) if (index === a.length) return false;
  return true;
}

/** Every emphasis delimiter in `text` has a partner, and hugs the text it marks (`*a b*`, never `* a*`). */
export function unbalancedDelimiter(text: string, delimiters: RegExp): string | undefined {
  const seen = new Map<string, number[]>();
  for (const m of text.matchAll(delimiters)) seen.set(m[0], [...(seen.get(m[0]) ?? []), m.index]);
  for (const [d, at] of seen) {
    if (at.length % 2) return `odd number of ${d}`;
    for (let i = 0; i < at.length; i += 2) {
      if (/\s/.test(text[at[i]! + d.length] ?? ' ') || /\s/.test(text[at[i + 1]! - 1] ?? ' ')) return `${d} next to a space`;
    }
  }
  return undefined;
}

/** A line of a message that shows quoted text (a QUOTED word) without its quote marker, if any. */
export function unquotedLine(chunk: string): string | undefined {
  return chunk.split('\n').find((l) => /Q[A-Z]/.test(l) && !/^[ \t]*>/.test(l));
}

/**
 * fast-check's parameters: `FC_SEED` (and `FC_PATH`) from the environment replay a failure reported by
 * an earlier run; `FC_RUNS` overrides the number of cases.
 */
export function fcParameters(numRuns: number): { numRuns: number; seed?: number; path?: string } {
  const seed = process.env.FC_SEED;
  const path = process.env.FC_PATH;
  const runs = Number(process.env.FC_RUNS);
  return {
    numRuns: Number.isInteger(runs) && runs > 0 ? runs : numRuns,
    ...(seed !== undefined && seed !== '' ? { seed: Number(seed) } : {}),
    ...(path ? { path } : {}),
  };
}

/** 2,000 cases take 10-20 s here; on a loaded 2-core machine several times that, past the suite's 20 s default. */
export const PROPERTY_TIMEOUT_MS = 120_000;
