export * from './backends';
