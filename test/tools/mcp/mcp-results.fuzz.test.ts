import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeMcpResult } from '../../../src/tools/mcp/mcp-results.ts';
import { objectSchema, validatorOf } from '../../../src/tools/mcp/mcp-server.ts';

describe('MCP results and schemas are hostile input', () => {
  it('2,000 generated results: always text, images and resources described, errors marked', () => {
    const block = fc.oneof(
      fc.record({ type: fc.constant('text'), text: fc.string({ maxLength: 300 }) }),
      fc.record({ type: fc.constantFrom('image', 'audio'), data: fc.base64String({ maxLength: 400 }), mimeType: fc.option(fc.string(), { nil: undefined }) }),
      fc.record({ type: fc.constant('resource'), resource: fc.record({ uri: fc.webUrl(), mimeType: fc.string(), text: fc.option(fc.string(), { nil: undefined }), blob: fc.option(fc.base64String(), { nil: undefined }) }, { requiredKeys: [] }) }),
      fc.record({ type: fc.constant('resource_link'), uri: fc.string(), name: fc.option(fc.string(), { nil: undefined }) }),
      fc.record({ type: fc.string({ maxLength: 100 }) }),
    );
    const results = fc.record({
      content: fc.option(fc.array(block, { maxLength: 8 }), { nil: undefined }),
      structuredContent: fc.option(fc.jsonValue(), { nil: undefined }),
      isError: fc.option(fc.boolean(), { nil: undefined }),
    });
    fc.assert(fc.property(results, (result) => {
      const text = describeMcpResult(result);
      expect(typeof text).toBe('string');
      expect(text.length).toBeGreaterThan(0);
      if (result.isError) expect(text.startsWith('Error from the tool: ')).toBe(true);
      for (const b of result.content ?? []) if (b.type === 'image') expect(text).toContain('[image: ');
    }), { numRuns: 2000 });
  });

  it('a resource link says its size when the server gives one', () => {
    expect(describeMcpResult({ content: [{ type: 'resource_link', uri: 'file:///r.csv', name: 'r.csv', mimeType: 'text/csv', size: 123456 }] })).toBe('[resource link: file:///r.csv (r.csv), text/csv, 123,456 bytes]');
    expect(describeMcpResult({ content: [{ type: 'resource_link', uri: 'file:///r.csv' }] })).toBe('[resource link: file:///r.csv]');
  });

  it('2,000 generated input schemas: each becomes an object schema and a validator that never throws', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 3 }), (schema, args) => {
      const asObject = schema && typeof schema === 'object' && !Array.isArray(schema) ? schema as Record<string, unknown> : undefined;
      const parameters = objectSchema(asObject);
      expect(parameters.type).toBe('object');
      expect(typeof parameters.properties === 'object' && !Array.isArray(parameters.properties)).toBe(true);
      expect(parameters.$schema).toBeUndefined();
      const result = validatorOf(parameters).safeParse(args);
      expect(typeof result.success).toBe('boolean');
    }), { numRuns: 2000 });
  });
});
