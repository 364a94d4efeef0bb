! coherence_print.f90 - host reads of a device-newer module array made
! inside libgfortran's formatted I/O (the BAD variant: a coherence bug, not
! a performance one).
!
! The module array p (N reals) is mapped with
! line 60: `!$acc enter data copyin(p)`
! and rewritten by the compute construct at
! line 61: `!$acc parallel loop present(p)`
! With VARIANT bad only its first ten elements come back
! (`!$acc update host(p(1:10))`), then the host prints p(5) and p(n/2) at
! line 70: `print *, 'p(5) =', p(5), ' p(n/2) =', p(n / 2)`
! and p(n) with a formatted write at
! line 71: `write (*, '(a, es14.7)') 'p(n) = ', p(n)`
! The reads of p(n/2) and p(n) are made by libgfortran (built without
! frame pointers),
! not by the program's code: the coherence check's walk out of libgfortran
! reports them at the program's statements. With VARIANT fixed the whole
! array comes back (`!$acc update host(p)`). On a GPU the bad variant prints
! the values from before the compute construct and the reference differs;
! on the host fallback (no device copies) both variants are right.
!
! Usage: coherence_print_f90 [N [VARIANT]]   defaults: 1048576 bad
!
! Expected profile (GCC 12 / libgomp): one upload of 8*N bytes (enter
! data), one compute construct, one download (80 bytes bad, 8*N fixed).
!   With `accprof run --check coherence` on a GPU, VARIANT bad: stale host
!   reads of p at the `print` and at the `write`, named p and placed at those
!   statements (never at libgfortran's code), written by the compute
!   construct; `accprof analyze` reports a C1 at each, proposing
!   `!$acc update self(p)` before it. VARIANT fixed: no finding. On the
!   host fallback the check says that it does not apply.
!
! Output: the printed values, "time: <seconds from the enter data on>",
! "checksum: <their sum>", then "reference: match" when they are the
! compute construct's, else "reference: MISMATCH" and exit status 1. Bad
! args: exit 2.
module coherence_print_field
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), allocatable :: p(:)
end module coherence_print_field

program coherence_print
  use coherence_print_field
  implicit none
  integer :: n, i
  logical :: fixed, ok
  integer(8) :: c0, c1, rate

  if (command_argument_count() > 2) then
    write (0, '(a)') 'usage: coherence_print_f90 [N [bad|fixed]]'
    stop 2
  end if
  n = arg(1, 1048576, 65536)
  fixed = variant(2)
  allocate(p(n))
  p = -1

  call system_clock(c0, rate)
  !$acc enter data copyin(p)
  !$acc parallel loop present(p)
  do i = 1, n
    p(i) = 2 * i - 1
  end do
  if (fixed) then
    !$acc update host(p)
  else
    !$acc update host(p(1:10))
  end if
  print *, 'p(5) =', p(5), ' p(n/2) =', p(n / 2) ! libgfortran reads p
  write (*, '(a, es14.7)') 'p(n) = ', p(n) ! libgfortran reads p
  ok = p(5) == 9 .and. p(n / 2) == 2 * (n / 2) - 1 .and. p(n) == 2 * real(n, dp) - 1
  !$acc exit data delete(p)
  call system_clock(c1)
  write (*, '(a, f0.3, a)') 'time: ', real(c1 - c0, dp) / real(rate, dp), ' s'
  write (*, '(a, es19.12)') 'checksum: ', p(5) + p(n / 2) + p(n)
  if (ok) then
    write (*, '(a)') 'reference: match'
  else
    write (*, '(a)') 'reference: MISMATCH'
    error stop 1
  end if
contains
  integer function arg(i, def, lo)
    integer, intent(in) :: i, def, lo
    character(len=64) :: text
    integer :: ios
    arg = def
    if (command_argument_count() < i) return
    call get_command_argument(i, text)
    read (text, *, iostat=ios) arg
    if (ios /= 0 .or. arg < lo) then
      write (0, '(a, i0, a, i0, a)') 'coherence_print_f90: argument ', i, ' must be an integer >= ', lo, &
        ', got ''' // trim(text) // ''''
      stop 2
    end if
  end function arg

  ! "bad" (the default) is false, "fixed" is true.
  logical function variant(i)
    integer, intent(in) :: i
    character(len=64) :: text
    variant = .false.
    if (command_argument_count() < i) return
    call get_command_argument(i, text)
    if (text == 'fixed') then
      variant = .true.
    else if (text /= 'bad') then
      write (0, '(a, i0, a)') 'coherence_print_f90: argument ', i, ' must be bad or fixed, got ''' // &
        trim(text) // ''''
      stop 2
    end if
  end function variant
end program coherence_print
