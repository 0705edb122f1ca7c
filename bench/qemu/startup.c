/* Minimal Cortex-M startup for the QEMU boards: vector table, Reset_Handler (FPU on, copy .data,
 * zero .bss, semihosting handles, main, exit), default fault handlers.
 * Linked with -nostartfiles --specs=nano.specs --specs=rdimon.specs (newlib's rdimon crt0 is not
 * used: it does not copy .data from flash). */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _estack[];
extern int main(void);
extern void initialise_monitor_handles(void);

void Reset_Handler(void);
void Default_Handler(void);
void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));

__attribute__((section(".isr_vector"), used))
void (*const tg_vector_table[16])(void) = {
    (void (*)(void))(uintptr_t)_estack,
    Reset_Handler,
    Default_Handler, /* NMI */
    Default_Handler, /* HardFault */
    Default_Handler, /* MemManage */
    Default_Handler, /* BusFault */
    Default_Handler, /* UsageFault */
    0, 0, 0, 0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMon */
    0,
    Default_Handler, /* PendSV */
    SysTick_Handler,
};

void Reset_Handler(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* CPACR: full access to CP10/CP11 (the FPU; Helium too) before any floating-point/vector instruction */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm volatile("dsb\n isb" ::: "memory");
#endif
    for (uint32_t *src = _sidata, *dst = _sdata; dst < _edata;)
        *dst++ = *src++;
    for (uint32_t *dst = _sbss; dst < _ebss;)
        *dst++ = 0;
    initialise_monitor_handles();
    exit(main());
}

/* Any fault: report over semihosting and stop QEMU with status 99 (never hang a test). */
void Default_Handler(void)
{
    static const char msg[] = "tg-harness: unexpected exception (fault)\n";
    /* SYS_WRITE0 then SYS_EXIT_EXTENDED(ADP_Stopped_ApplicationExit, 99) */
    __asm volatile("mov r0, #4\n mov r1, %0\n bkpt 0xab" ::"r"(msg) : "r0", "r1", "memory");
    static const uint32_t block[2] = {0x20026u, 99u};
    __asm volatile("mov r0, #0x20\n mov r1, %0\n bkpt 0xab" ::"r"(block) : "r0", "r1", "memory");
    for (;;) {
    }
}
