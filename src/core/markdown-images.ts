/** One piece of an answer: text as it was, or an image the channel sends natively (SPEC §15 "Out"). */
export type MarkdownPart = { kind: 'text'; text: string } | { kind: 'image'; url: string; alt: string };

/**
 * A markdown image alone on its line: `![alt](https://…)` with an optional title (`"…"`, `'…'` or `(…)`), the
 * URL bare or in `<…>`, spaces around allowed. Only http and https URLs; the alt text has no brackets.
 */
const IMAGE_LINE = /^[ \t]*!\[([^[\]\n]*)\]\([ \t]*(?:<(https?:\/\/[^<>\s]+)>|(https?:\/\/[^\s()<>]+))(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*\)[ \t]*$/i;

/** An opening or closing code fence: up to 3 spaces, then 3 or more backticks or tildes. */
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/**
 * Splits an answer's markdown into text and images: a markdown image alone on its line (outside fenced code
 * blocks) becomes an image part, everything else stays text, in order. Adjacent text is merged; blank lines
 * at the edges of a text part are dropped, and a text part with nothing visible is left out. Pure.
 */
export function splitImageLines(markdown: string): MarkdownPart[] {
  const parts: MarkdownPart[] = [];
  let text: string[] = [];
  let fence: string | undefined;
  const flush = () => {
    const joined = trimBlankEdges(text.join('\n'));
    if (joined) parts.push({ kind: 'text', text: joined });
    text = [];
  };
  for (const line of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    const marker = FENCE.exec(line)?.[1];
    if (fence !== undefined) {
      // A fence closes with the same character, at least as long, and nothing after it but spaces.
      if (marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      text.push(line);
      continue;
    }
    if (marker) {
      fence = marker;
      text.push(line);
      continue;
    }
    const image = IMAGE_LINE.exec(line);
    if (!image) {
      text.push(line);
      continue;
    }
    flush();
    parts.push({ kind: 'image', url: (image[2] ?? image[3])!, alt: image[1]!.trim() });
  }
  flush();
  return parts;
}

/** True when the answer holds at least one image line (channels keep their plain path otherwise). */
export function hasImageLines(markdown: string): boolean {
  return splitImageLines(markdown).some((part) => part.kind === 'image');
}

function trimBlankEdges(text: string): string {
  return text.replace(/^(?:[ \t]*\n)+/, '').replace(/\s+$/, '');
}
