/*
 * A stand-in for Windows' bcryptprimitives.dll, which Wine 8.0 lacks and Rust's standard
 * library imports (ProcessPrng, its source of random bytes): for the Windows end-to-end test
 * under Wine only. Real Windows 10 and later have the DLL.
 */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    return RtlGenRandom(data, (ULONG)length);
}
