import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorCode, problemOf, type Answer } from './api/client';

/**
 * An admin answer shown as it is: its status, what it means, and its body.
 * A 503 change_not_propagated is committed but not yet confirmed in force on
 * every instance (docs/API.md): it says so and offers the retry, which
 * repeats the call (the API's way to re-propagate).
 */
export function AnswerView({ answer, onRetry, what }: { answer: Answer; onRetry?: (() => void) | undefined; what?: string | undefined }) {
  const code = errorCode(answer);
  const problem = problemOf(answer);
  const notPropagated = code === 'change_not_propagated';
  const meaning = answer.ok
    ? 'Done: committed and in force everywhere.'
    : notPropagated
      ? 'Committed, not yet in force everywhere. Retry to confirm it.'
      : answer.status === 0
        ? 'The registry could not be reached.'
        : `Refused: ${code ?? 'error'}${problem ? ` — ${problem}` : ''}`;
  return (
    <div class={`answer ${answer.ok ? 'ok' : notPropagated ? 'warn' : 'bad'}`} role="status" aria-live="polite" data-what={what}>
      <p>
        {what && <span class="what">{what}:</span>}
        <strong class="status">{answer.status || '—'}</strong> <span class="meaning">{meaning}</span>
        {notPropagated && onRetry && (
          <button type="button" class="retry" onClick={onRetry}>
            Retry
          </button>
        )}
      </p>
      <details>
        <summary>Answer body</summary>
        <pre>{JSON.stringify(answer.body, null, 2)}</pre>
      </details>
    </div>
  );
}

/**
 * A button that asks first: a modal dialog saying what the action does. The
 * browser's <dialog> keeps focus inside and closes on Escape.
 */
export function ConfirmButton(props: { label: string; title: string; children: ComponentChildren; danger?: boolean; onConfirm: () => void; id?: string }) {
  const dialog = useRef<HTMLDialogElement>(null);
  return (
    <>
      <button type="button" id={props.id} class={props.danger ? 'danger' : ''} onClick={() => dialog.current?.showModal()}>
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={props.id ? `${props.id}-title` : undefined}>
        <form
          method="dialog"
          onSubmit={(e) => {
            const submitter = (e as SubmitEvent).submitter as HTMLButtonElement | null;
            if (submitter?.value === 'confirm') props.onConfirm();
          }}
        >
          <h3 id={props.id ? `${props.id}-title` : undefined}>{props.title}</h3>
          <div class="what">{props.children}</div>
          <div class="buttons">
            <button value="cancel" autofocus>
              Cancel
            </button>
            <button value="confirm" class={props.danger ? 'danger confirm' : 'confirm'}>
              {props.label}
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}

/** A host-sync credential, shown this once: copy it now, it cannot be read again. */
export function CredentialOnce({ clientId, secret, onDone }: { clientId: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    navigator.clipboard.writeText(secret).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return (
    <section class="credential" aria-label="Host-sync credential">
      <p class="warning">
        <strong>Shown once.</strong> This host-sync secret is not stored readable anywhere and will not be shown again. Copy it into the host's secret store now.
      </p>
      <dl>
        <dt>client id</dt>
        <dd>
          <code class="client-id">{clientId}</code>
        </dd>
        <dt>client secret</dt>
        <dd>
          <code class="secret">{secret}</code>
        </dd>
      </dl>
      <button type="button" class="copy" onClick={copy}>
        {copied ? 'Copied' : 'Copy secret'}
      </button>{' '}
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </section>
  );
}

/** A table that scrolls sideways on a narrow screen instead of overflowing the page. */
export function Table({ children, label }: { children: ComponentChildren; label: string }) {
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table>{children}</table>
    </div>
  );
}

/** Runs `fn` now and every `ms` while the tab is visible (the Live page). */
export function useInterval(fn: () => void, ms: number): void {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    saved.current();
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') saved.current();
    }, ms);
    return () => clearInterval(timer);
  }, [ms]);
}

export function shortId(id: string): string {
  return id.slice(0, 8);
}

export function time(iso: string): string {
  return new Date(iso).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** Cursor paging: back (to the previous page, or to the first with `backToFirst`), the page number, forward. */
export function Pager({ cursors, next, onChange, labels }: { cursors: Array<string | undefined>; next: string | null; onChange: (c: Array<string | undefined>) => void; labels: [string, string] }) {
  const backToFirst = labels[0] === 'Newest';
  return (
    <div class="pager">
      <button type="button" disabled={cursors.length === 1} onClick={() => onChange(backToFirst ? [undefined] : cursors.slice(0, -1))}>
        {labels[0]}
      </button>
      <span>Page {cursors.length}</span>
      <button type="button" disabled={!next} onClick={() => next && onChange([...cursors, next])}>
        {labels[1]}
      </button>
    </div>
  );
}
