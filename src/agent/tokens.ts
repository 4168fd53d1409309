import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';

/** Tokenizer encodings we ship. */
export type Encoding = 'o200k_base' | 'cl100k_base';

/**
 * The encoding for a model family. GPT-4o, 4.1, 5, o-series and unknown models use `o200k_base` (the
 * encoding of every current OpenAI model, and the closer fit for most open models); GPT-4, GPT-3.5 and
 * text-embedding models use `cl100k_base`.
 */
export function encodingFor(model: string): Encoding {
  const m = model.toLowerCase().replace(/^.*\//, '');
  if (/^(gpt-4(?!o|\.1|\.5)|gpt-3\.5|text-embedding-(ada|3))/.test(m)) return 'cl100k_base';
  return 'o200k_base';
}

/** Exact token count of a text for a model's encoding. */
export function countTokens(text: string, model = 'gpt-4o'): number {
  if (!text) return 0;
  return encodingFor(model) === 'cl100k_base' ? countCl100k(text) : countO200k(text);
}
