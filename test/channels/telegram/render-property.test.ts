import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { markdownToTelegramHtml } from '../../../channels/telegram/render.ts';
import { splitHtml, TELEGRAM_TEXT_LIMIT } from '../../../channels/telegram/split-html.ts';
import { parseTelegramHtml } from '../../fakes/fake-telegram.ts';
import { cutsCluster, limitFor, LONE_SURROGATE, markdownCase, missingFragment, fcParameters, PROPERTY_TIMEOUT_MS } from '../markdown-arbitrary.ts';

/** The text Telegram shows for one message; fails when Telegram would refuse the HTML. */
function visible(html: string): string {
  const parsed = parseTelegramHtml(html);
  if ('error' in parsed) throw new Error(`${parsed.error}\n${html.slice(0, 500)}`);
  return parsed.text;
}

const squeeze = (s: string) => s.replace(/\s+/g, '');

describe('Telegram rendering, property-based (fast-check)', () => {
  it('every message parses strictly, is within the limit as Telegram counts it, and the text survives whole and in order', () => {
    const cases = markdownCase({ emphasis: ['**', '*', '_', '~~'], bareUrlIsText: true, emptyLinkShowsUrl: true });
    fc.assert(fc.property(cases, limitFor(TELEGRAM_TEXT_LIMIT), ({ markdown, fragments }, limit) => {
      const html = markdownToTelegramHtml(markdown, Math.floor(limit / 2));
      const chunks = splitHtml(html, limit); // what renderOutbound does, without parsing the markdown twice
      const texts = chunks.map(visible);
      for (const [i, text] of texts.entries()) {
        expect(text.length).toBeLessThanOrEqual(limit);
        expect(text.trim()).not.toBe('');
        expect(chunks[i]).not.toMatch(LONE_SURROGATE);
        if (i > 0) expect(cutsCluster(texts[i - 1]!, text)).toBe(false);
        // A message ends early only to keep something whole that then fills most of the next one (or at
        // the end of a code line, between two parts of a code block, rather than inside the next line).
        const codeLineEnd = /<\/pre>$/.test(chunks[i - 1] ?? '') && chunks[i]!.startsWith('<pre>');
        const blockGoesOn = /^<pre>[\s\S]*<\/pre>$/.test(chunks[i]!) && (chunks[i + 1] ?? '').startsWith('<pre>');
        if (i > 0 && !codeLineEnd && !blockGoesOn) expect(texts[i - 1]!.length + text.length).toBeGreaterThan(limit / 4);
      }
      expect(missingFragment(texts.join('\n'), fragments)).toBeUndefined();
      expect(squeeze(texts.join(''))).toBe(squeeze(visible(html)));
    }), fcParameters(2000));
  }, PROPERTY_TIMEOUT_MS);
});
