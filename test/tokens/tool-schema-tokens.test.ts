import { encode as encodeO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { encode as encodeCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { describe, expect, it } from 'vitest';
import { encodingFor, TOOL_SCHEMA_OVERHEAD, toolSchemaTokens } from '../../src/tokens/tokens.ts';
import type { ToolSchema } from '../../src/providers/types.ts';

const schema = (description: string): ToolSchema => ({
  name: 'sessions_send', description, parameters: { type: 'object', properties: { key: { type: 'string', description: 'the session key' }, text: { type: 'string' } }, required: ['key', 'text'] },
});
const literal = (tool: ToolSchema, encode: (text: string) => number[]) =>
  encode(JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters })).length + TOOL_SCHEMA_OVERHEAD;

describe('tool schema tokens', () => {
  it('counts a schema per encoding, the same each time it is asked', () => {
    const tool = schema('Sends a message to another session and returns its answer.');
    for (let i = 0; i < 3; i++) {
      expect(toolSchemaTokens(tool, 'gpt-4o')).toBe(literal(tool, encodeO200k));
      expect(toolSchemaTokens(tool, 'gpt-4')).toBe(literal(tool, encodeCl100k));
      expect(toolSchemaTokens(tool, 'some-local-model')).toBe(literal(tool, encodeO200k));
    }
    expect(literal(tool, encodeO200k)).not.toBe(literal(tool, encodeCl100k));
  });

  it('counts a tool registered again with another description anew', () => {
    const before = schema('Sends.');
    const after = schema('Sends a message to another session, waits for its answer and returns it with the session key it came from.');
    expect(toolSchemaTokens(before, 'gpt-4o')).toBe(literal(before, encodeO200k));
    expect(toolSchemaTokens(after, 'gpt-4o')).toBe(literal(after, encodeO200k));
    expect(toolSchemaTokens(after, 'gpt-4o')).toBeGreaterThan(toolSchemaTokens(before, 'gpt-4o'));
  });

  it('gives a model name the same encoding when asked again', () => {
    for (const [model, encoding] of [['gpt-4', 'cl100k_base'], ['GPT-4o', 'o200k_base'], ['openai/gpt-3.5-turbo', 'cl100k_base'], ['qwen2.5-7b', 'o200k_base']] as const) {
      expect(encodingFor(model)).toBe(encoding);
      expect(encodingFor(model)).toBe(encoding);
    }
  });
});
