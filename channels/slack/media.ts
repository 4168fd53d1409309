import { downloadOf, downloadStopped, networkReason, tooLargeDownload } from '../../src/core/media-download.ts';
import { MediaFetchError } from '../../src/core/errors.ts';
import type { Attachment, MediaDownload } from '../../src/core/message.ts';

/** The host Slack serves `url_private` files from. */
export const SLACK_FILES_HOST = 'files.slack.com';

/** Redirects followed at most, and only to Slack's own file hosts. */
const MAX_REDIRECTS = 3;

/**
 * Whether a URL may receive the bot token: https on {@link SLACK_FILES_HOST}, or on the host (and port) of the
 * configured `apiUrl` (a proxy, the tests' fake). The token goes nowhere else.
 */
export function isSlackFileUrl(raw: string, apiUrl: string): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  if (url.username || url.password) return false;
  if (url.protocol === 'https:' && url.hostname.toLowerCase() === SLACK_FILES_HOST) return true;
  if (!apiUrl) return false;
  try {
    const base = new URL(apiUrl);
    return url.protocol === base.protocol && url.host === base.host;
  } catch {
    return false;
  }
}

/**
 * Opens a Slack file's bytes from its `url_private` with `Authorization: Bearer <botToken>` (SPEC §15),
 * streamed. The token is sent only to Slack's file host ({@link isSlackFileUrl}): redirects are followed by
 * hand, at most three, and only to such hosts, never elsewhere with the token. A file over `maxBytes` as
 * announced is refused before downloading (`too_large`); a non-2xx answer (a missing `files:read` scope shows
 * as a redirect to a login page or a 403) or a broken connection is `download_failed`; an aborted `signal`
 * `timeout`. Errors never hold the token.
 */
export async function fetchSlackMedia(
  source: { botToken: string; apiUrl: string }, attachment: Attachment, options: { signal: AbortSignal; maxBytes: number },
): Promise<MediaDownload> {
  const { signal, maxBytes } = options;
  const tooLarge = (size: number) => tooLargeDownload('The Slack file', size, maxBytes);
  if (attachment.size !== undefined && attachment.size > maxBytes) throw tooLarge(attachment.size);
  let url = attachment.url;
  if (!url) throw new MediaFetchError('download_failed', 'The Slack file has no url_private (not shared with the bot).');
  for (let redirects = 0; ; redirects++) {
    if (!isSlackFileUrl(url, source.apiUrl)) throw new MediaFetchError('download_failed', `Not a Slack file URL (${safeHost(url)}); not fetched.`);
    let response: Response;
    try {
      response = await fetch(url, { signal, redirect: 'manual', headers: { authorization: `Bearer ${source.botToken}` } });
    } catch (error) {
      if (signal.aborted) throw downloadStopped('The Slack file');
      throw new MediaFetchError('download_failed', `The Slack file download failed (${networkReason(error)}).`);
    }
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      await response.body?.cancel().catch(() => undefined);
      const next = new URL(location, url).toString();
      if (redirects >= MAX_REDIRECTS || !isSlackFileUrl(next, source.apiUrl)) {
        throw new MediaFetchError('download_failed', `Slack redirected the file download to ${safeHost(next)} (is the files:read scope granted?); not followed.`);
      }
      url = next;
      continue;
    }
    return downloadOf(response, {
      maxBytes, signal, what: 'The Slack file', refused: (status) => `Slack answered ${status} to the file download${status === 401 || status === 403 ? ' (is the files:read scope granted?)' : ''}.`,
      mime: attachment.mimeType, size: attachment.size,
    });
  }
}

function safeHost(raw: string): string {
  try {
    return new URL(raw).host || 'no host';
  } catch {
    return 'not a URL';
  }
}
