import { a } from './probe16423-a.ts';
export const b = (): number => (Date.now() > 0 ? 1 : a());
