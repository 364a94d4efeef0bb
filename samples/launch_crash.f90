! launch_crash.f90 - a Fortran program that dies of SIGSEGV in a compute
! construct: the kernel is handed an address that is not device memory.
! libgfortran installs its own SIGSEGV handler (the backtrace) when the
! program starts, after any tool's, and re-raises the signal from it.
!
!   line 49: `!$acc data copy(x)` keeps x on the device;
!   line 50: `!$acc parallel loop present(x)` doubles it (a good kernel
!     first, so the trace has work before the crash);
!   line 55: `call fill(bad, n)` calls the subroutine whose
!   line 66: `!$acc parallel loop deviceptr(y)` writes through the address
!     0x1000, which the program says is a device pointer.
!
! On a GPU the launch of line 66 is where the program dies (in the CUDA
! driver, or at the synchronization after it, depending on the driver).
! On the host fallback the loop runs on the host and its first write is a
! SIGSEGV inside the construct of line 66: libgfortran prints its
! backtrace and the process dies of the signal. Either way a profiler must
! keep the trace up to the crash, the signal, and the construct (and on a
! GPU the driver call) it died in.
!
! Usage: launch_crash_f90 [N]          default: 1048576
program launch_crash
  use iso_c_binding, only: c_ptr, c_intptr_t, c_f_pointer
  implicit none
  integer :: n, i, stat
  character(len=32) :: arg
  real(8), allocatable :: x(:)
  real(8), pointer :: bad(:)
  type(c_ptr) :: p

  n = 1048576
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *, iostat=stat) n
    if (stat /= 0 .or. n < 1) then
      write (0, '(a,a,a)') 'launch_crash_f90: N must be an integer >= 1, got ''', trim(arg), ''''
      stop 2
    end if
  end if
  allocate (x(n))
  do i = 1, n
    x(i) = real(i, 8)
  end do
  p = transfer(int(z'1000', c_intptr_t), p)
  call c_f_pointer(p, bad, [n])
  write (*, '(a,i0,a)') 'launch_crash_f90: n = ', n, ', writing through 0x1000 next'
  flush (6)

  !$acc data copy(x)
  !$acc parallel loop present(x)
  do i = 1, n
    x(i) = 2.0d0 * x(i)
  end do
  ! the crash
  call fill(bad, n)
  !$acc end data
  write (*, '(a,g0)') 'launch_crash_f90: survived, x(2) = ', x(2)
  stop 3

contains

  subroutine fill(y, m)
    integer, intent(in) :: m
    real(8), intent(out) :: y(m)
    integer :: k
    !$acc parallel loop deviceptr(y)
    do k = 1, m
      y(k) = real(k, 8)
    end do
  end subroutine fill

end program launch_crash
