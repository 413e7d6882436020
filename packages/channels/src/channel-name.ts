/** Channel names of the tenant REST and WebSocket APIs and the host server API. */
export const CHANNEL_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A channel named in a URL path segment, percent-decoded; undefined when it does not decode to a channel name. */
export function decodeChannel(segment: string): string | undefined {
  let channel: string;
  try {
    channel = decodeURIComponent(segment);
  } catch {
    return undefined;
  }
  return CHANNEL_NAME.test(channel) ? channel : undefined;
}
