import { describe, expect, it } from 'vitest';
import { modelSeesImages } from '../../src/config/media.ts';

describe('vision: which models see images (SPEC §15)', () => {
  it('auto: the documented families see, others do not; a provider prefix and case do not matter', () => {
    for (const model of ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1-nano', 'gpt-5', 'o3', 'o4-mini', 'claude-sonnet-4', 'gemini-2.5-pro', 'qwen2.5-vl-7b', 'llava-1.6', 'openai/GPT-4o']) {
      expect(modelSeesImages('auto', model), model).toBe(true);
    }
    for (const model of ['gpt-3.5-turbo', 'gpt-4', 'llama-3.1-70b', 'mistral-small', 'gpt-test', 'o1-mini']) expect(modelSeesImages('auto', model), model).toBe(false);
    // The answer is kept per model: asking again gives the same.
    expect(modelSeesImages('auto', 'gpt-4o')).toBe(true);
  });

  it('on and off hold whatever the model', () => {
    expect(modelSeesImages('on', 'llama-3.1-70b')).toBe(true);
    expect(modelSeesImages('off', 'gpt-4o')).toBe(false);
  });
});
