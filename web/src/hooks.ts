import { useEffect, useState } from 'preact/hooks';

/** The part of the URL after '#', e.g. "/meetings/123"; the app routes on it. */
export function useRoute(): string {
  const read = () => window.location.hash.replace(/^#/, '') || '/';
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function navigate(route: string): void {
  window.location.hash = route;
}

/**
 * Calls `fn` now and every `ms` while mounted; `fn` returning false stops the polling, a number
 * waits that many milliseconds before the next call instead.
 */
export function usePoll(fn: () => Promise<boolean | number | void>, ms: number, deps: unknown[]): void {
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      let again: boolean | number | void = true;
      try {
        again = await fn();
      } catch {
        again = true;
      }
      if (!stopped && again !== false)
        timer = setTimeout(() => void tick(), typeof again === 'number' ? again : ms);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);
}
