/**
 * True when the JSON text has an object with a repeated member name, at any
 * depth. JSON.parse keeps the last of two equal names silently, so `parsed`
 * (the result of JSON.parse(text)) holds fewer members than the text names
 * exactly when a name repeats. In valid JSON the colons outside strings are
 * exactly the name separators.
 */
export function hasDuplicateMembers(text: string, parsed: unknown): boolean {
  const members = countMembers(parsed);
  // Fast path: every colon (inside strings or not) is at least every separator,
  // so when the plain count already equals the members, no name can repeat.
  if (countAllColons(text) === members) return false;
  return countNameSeparators(text) !== members;
}

function countAllColons(text: string): number {
  let n = 0;
  for (let i = text.indexOf(':'); i >= 0; i = text.indexOf(':', i + 1)) n++;
  return n;
}

function countNameSeparators(text: string): number {
  let count = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x3a) {
      count++;
    }
  }
  return count;
}

function countMembers(value: unknown): number {
  let count = 0;
  // Nested values are walked from an explicit stack: the text is bounded
  // (8 KiB), but a recursive walk would let a payload choose our stack depth.
  let stack: unknown[] | undefined;
  let v: unknown = value;
  for (;;) {
    if (typeof v === 'object' && v !== null) {
      if (Array.isArray(v)) {
        for (const item of v) if (typeof item === 'object' && item !== null) (stack ??= []).push(item);
      } else {
        for (const key in v) {
          count++;
          const child = (v as Record<string, unknown>)[key];
          if (typeof child === 'object' && child !== null) (stack ??= []).push(child);
        }
      }
    }
    if (!stack || stack.length === 0) return count;
    v = stack.pop();
  }
}
