import { describe, expect, it } from 'vitest';
import { normalizeUsage } from '../../src/providers/openai.ts';

describe('usage normalization (OpenAI-style usage → ours)', () => {
  it('maps prompt and completion tokens; cached prompt tokens are cache reads, not input', () => {
    expect(normalizeUsage({ prompt_tokens: 1000, completion_tokens: 50, total_tokens: 1050, prompt_tokens_details: { cached_tokens: 800 } }))
      .toEqual({ inputTokens: 200, outputTokens: 50, cacheReadTokens: 800, cacheWriteTokens: 0 });
  });

  it('takes cache writes where a provider reports them', () => {
    expect(normalizeUsage({ prompt_tokens: 500, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 100, cache_write_tokens: 300 } }))
      .toEqual({ inputTokens: 100, outputTokens: 10, cacheReadTokens: 100, cacheWriteTokens: 300 });
    expect(normalizeUsage({ prompt_tokens: 40, completion_tokens: 1, cache_creation_input_tokens: 30, cache_read_input_tokens: 5 }))
      .toEqual({ inputTokens: 5, outputTokens: 1, cacheReadTokens: 5, cacheWriteTokens: 30 });
  });

  it('is undefined when the provider reports no usage (the runtime then estimates)', () => {
    expect(normalizeUsage(undefined)).toBeUndefined();
    expect(normalizeUsage(null)).toBeUndefined();
    expect(normalizeUsage({})).toBeUndefined();
  });

  it('treats a missing details object as no cache', () => {
    expect(normalizeUsage({ prompt_tokens: 7, completion_tokens: 3, prompt_tokens_details: null })).toEqual({ inputTokens: 7, outputTokens: 3, cacheReadTokens: 0, cacheWriteTokens: 0 });
  });
});
