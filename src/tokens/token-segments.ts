/**
 * Cuts text into pieces that are counted one by one (and remembered one by one), so that counting never
 * runs the tokenizer over a long stretch at once.
 *
 * **Exactness.** The GPT pre-tokenizers (`cl100k_base`, `o200k_base`) never let a piece span a space
 * that follows a non-space character, nor a punctuation mark or symbol (other than `'`) that follows a
 * letter or digit: the piece before ends there and the next one starts there. Cutting the text at such a
 * place changes nothing: the sum of the pieces' counts is the count of the whole. Pieces are cut at spaces;
 * an unbroken run (no whitespace) is cut at such a punctuation mark once it is {@link RUN_SOFT_LIMIT}
 * characters long. Only a run with no such mark for {@link RUN_HARD_LIMIT} characters (a 100k-letter
 * line, a wall of emoji, CJK text without punctuation) is cut anywhere (never between the halves of a
 * surrogate pair): a token that would straddle that cut counts as two, so such a run may count about one
 * token per {@link RUN_HARD_LIMIT} characters more than the model's own tokenizer. A run of whitespace
 * (spaces, newlines, tabs, no-break spaces, in any mix) is one pre-tokenizer piece however long, so it is
 * cut the same way once it is {@link RUN_HARD_LIMIT} characters long, with the same cost: about one token
 * per {@link RUN_HARD_LIMIT} whitespace characters more at most. Everything else,
 * prose, code, JSON, URLs, base64 and CJK text with punctuation included, counts exactly.
 *
 * **Cost.** Byte-pair encoding of one pre-tokenizer piece grows with the square of its length, which made
 * one 100k-character run take seconds; with runs cut, work is linear in the length.
 *
 * **Stability.** Cuts are chosen by content (a hash of the word before a space, the run's own start), not
 * by position, so the same text inside a longer one (a message behind a time line, a transcript inside a
 * summary request) yields mostly the same pieces, and remembered counts are found again.
 */

/** An unbroken run (no whitespace) is cut at the next safe punctuation mark once this long (UTF-16 units). */
export const RUN_SOFT_LIMIT = 256;
/** An unbroken run, or a run of whitespace, is cut anywhere once this long without a safe place. */
export const RUN_HARD_LIMIT = 512;
/** A piece is not cut by content before it is this long. */
const MIN_PIECE = 64;
/** A piece is cut at the next space once it is this long, whatever the content. */
const MAX_PIECE = 1024;
/** A content-defined cut falls after about one word in 16. */
const CUT_MASK = 15;

/** True for what the pre-tokenizers' `\s` matches. */
function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029
    || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;
const WORD_CHAR = /[\p{L}\p{M}\p{N}]/u;
/** Class of each UTF-16 unit seen so far: 0 not yet known, 1 letter/mark/digit, 2 other. */
const bmpClass = new Uint8Array(0x10000);

/** Letter, mark or digit (`\p{L}\p{M}\p{N}`) of the code point starting at `i`. */
function isWordChar(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  if (c < 0x80) return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
  if (isHighSurrogate(c)) return WORD_CHAR.test(text.slice(i, i + 2));
  let known = bmpClass[c]!;
  if (known === 0) {
    known = WORD_CHAR.test(String.fromCharCode(c)) ? 1 : 2;
    bmpClass[c] = known;
  }
  return known === 1;
}

/**
 * The end offsets of the pieces of `text` (the last one is `text.length`); see the module comment for
 * where cuts fall and what they cost in exactness.
 */
export function segmentEnds(text: string): number[] {
  const ends: number[] = [];
  const n = text.length;
  let pieceStart = 0;
  let run = 0;
  let hash = 0;
  let previousSpace = true;
  /** Length of the whitespace run ending before `i`. */
  let spaceRun = 0;
  /** Whether the code point before `i` is a letter, mark or digit (known once a run is long). */
  let previousWord = false;
  const cut = (i: number) => {
    if (i > pieceStart) ends.push(i);
    pieceStart = i;
    run = 0;
  };
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (isSpace(c)) {
      // A cut right before a plain space that follows a non-space is exact.
      if (c === 0x20 && !previousSpace) {
        const length = i - pieceStart;
        if ((length >= MIN_PIECE && ((hash ^ (hash >>> 11)) & CUT_MASK) === 0) || length >= MAX_PIECE) cut(i);
      }
      // A whitespace run is one pre-tokenizer piece however long: cut it like an unbroken run.
      if (!previousSpace) spaceRun = 0;
      else if (spaceRun >= RUN_HARD_LIMIT) {
        cut(i);
        spaceRun = 0;
      }
      spaceRun++;
      run = 0;
      hash = 0;
      previousSpace = true;
      continue;
    }
    if (run >= RUN_SOFT_LIMIT - 1 && !isLowSurrogate(c)) {
      const word = isWordChar(text, i);
      // A punctuation mark or symbol after a letter or digit starts a new pre-tokenizer piece (`'` may not: it's).
      if (run >= RUN_SOFT_LIMIT && previousWord && !word && c !== 0x27) cut(i);
      else if (run >= RUN_HARD_LIMIT) cut(i);
      previousWord = word;
    }
    run++;
    hash = (Math.imul(hash, 31) + c) | 0;
    previousSpace = false;
  }
  if (n > pieceStart || n === 0) ends.push(n);
  return ends;
}
